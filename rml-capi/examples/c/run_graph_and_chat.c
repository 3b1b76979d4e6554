/* The rml C API end to end: run an rml-graph on an input read from .npy and compare
 * the output with the expected .npy, then tokenize a prompt and generate text with
 * an LLM, streaming it through a callback.
 *
 *   run_graph_and_chat GRAPH.json INPUT.npy EXPECTED.npy MODEL PROMPT [PROMPT_IDS GREEDY_IDS]
 *
 * The graph's single input gets INPUT.npy. With PROMPT_IDS and GREEDY_IDS (comma-
 * separated token ids from a reference), generation is greedy for as many tokens as
 * GREEDY_IDS holds and both lists must match; without them it samples 32 tokens.
 * Exits 1 on any error or mismatch. Build (see docs/embedding.md):
 *
 *   gcc -std=c11 -I rml-capi/include run_graph_and_chat.c target/release/librml_capi.a -lm -lpthread -ldl
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"
#include "rml.h"

/* Prints the failure of `st` (the call named `what`); returns 1 when it failed. */
static int failed(RmlStatus st, const char *what) {
  if (st == RML_STATUS_OK) return 0;
  fprintf(stderr, "%s: %s: %s\n", what, rml_status_name(st), rml_last_error());
  return 1;
}

/* Parses "1,2,3" into ids (at most cap); returns the count. */
static size_t parse_ids(const char *text, uint32_t *ids, size_t cap) {
  size_t n = 0;
  while (*text && n < cap) {
    char *end;
    unsigned long id = strtoul(text, &end, 10);
    if (end == text) break;
    ids[n++] = (uint32_t)id;
    text = *end == ',' ? end + 1 : end;
  }
  return n;
}

/* Runs the graph on the input and checks its first output against the expected. */
static int run_graph(const char *graph_path, const char *input_path, const char *expected_path) {
  RmlGraph graph;
  RmlTensorInfo in_info, out_info;
  Npy x, want;
  float *y = NULL;
  double max_err = 0.0;
  int bad = 1;
  size_t i;

  if (npy_read(input_path, &x) || npy_read(expected_path, &want)) return 1;
  if (failed(rml_graph_load(graph_path, 1, &graph), "rml_graph_load")) goto out;
  if (failed(rml_graph_describe_input(graph, 0, &in_info), "rml_graph_describe_input")) goto free_graph;

  {
    RmlTensor input = {in_info.name, RML_DTYPE_F32, x.rank, x.dims, x.data, x.count * sizeof(float)};
    if (failed(rml_graph_run(graph, &input, 1), "rml_graph_run")) goto free_graph;
  }
  /* Ask for the size, then copy into our own buffer. */
  if (failed(rml_graph_get_output(graph, 0, &out_info, NULL, 0), "rml_graph_get_output")) goto free_graph;
  y = malloc(out_info.byte_len);
  if (failed(rml_graph_get_output(graph, 0, NULL, y, out_info.byte_len), "rml_graph_get_output")) goto free_graph;

  printf("graph: %s -> %s [", in_info.name, out_info.name);
  for (i = 0; i < out_info.rank; i++) printf(i ? ", %lld" : "%lld", (long long)out_info.dims[i]);
  if (out_info.dtype != RML_DTYPE_F32 || out_info.byte_len != want.count * sizeof(float)) {
    printf("]: dtype or size differs from %s\n", expected_path);
    goto free_graph;
  }
  for (i = 0; i < want.count; i++) {
    double e = fabs((double)y[i] - (double)want.data[i]);
    if (!(e <= max_err)) max_err = e; /* NaN makes it NaN */
  }
  printf("], max error vs %s: %.3g\n", expected_path, max_err);
  bad = !(max_err < 1e-5);
free_graph:
  if (failed(rml_graph_free(graph), "rml_graph_free")) bad = 1;
out:
  free(y);
  free(x.data);
  free(want.data);
  return bad;
}

/* What the text callback keeps between calls. */
typedef struct {
  size_t pieces;
  size_t bytes;
} Stream;

static int32_t print_text(const char *text, size_t len, void *user_data) {
  Stream *s = user_data;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  s->pieces++;
  s->bytes += len;
  return 0; /* non-zero would stop the generation */
}

/* Tokenizes the prompt and generates; with reference ids, greedily and checked. */
static int chat(const char *model_path, const char *prompt, const char *prompt_ids, const char *greedy_ids) {
  RmlLlm llm;
  uint32_t ids[512], want_prompt[512], want[512], out[512];
  size_t n_ids, n_want_prompt = 0, n_want = 0;
  RmlGenerateOptions options = rml_generate_options_default();
  RmlGeneration result;
  Stream stream = {0, 0};
  int bad = 1;

  if (failed(rml_llm_load(model_path, &llm), "rml_llm_load")) return 1;
  if (prompt_ids) {
    n_want_prompt = parse_ids(prompt_ids, want_prompt, 512);
    n_want = parse_ids(greedy_ids, want, 512);
    /* The reference tokenized without BOS, and generated greedily with no end token. */
    if (failed(rml_llm_tokenize(llm, prompt, RML_TOKENIZE_PARSE_SPECIAL, ids, 512, &n_ids), "rml_llm_tokenize"))
      goto free_llm;
    options.temperature = 0.0f;
    options.max_tokens = n_want;
    options.stop_at_eos = 0;
  } else {
    if (failed(rml_llm_tokenize(llm, prompt, RML_TOKENIZE_ADD_SPECIAL | RML_TOKENIZE_PARSE_SPECIAL, ids, 512, &n_ids),
               "rml_llm_tokenize"))
      goto free_llm;
    options.max_tokens = 32;
  }
  printf("prompt: %zu tokens\n%s", n_ids, prompt);
  fflush(stdout);
  if (failed(rml_llm_generate(llm, ids, n_ids, &options, print_text, &stream, out, 512, &result), "rml_llm_generate"))
    goto free_llm;
  printf("\ngenerated %zu tokens in %zu pieces (%zu bytes), %.1f tokens/s\n", result.n_tokens, stream.pieces,
         stream.bytes, result.decode_seconds > 0 ? result.n_tokens / result.decode_seconds : 0.0);
  bad = 0;
  if (prompt_ids) {
    if (n_ids != n_want_prompt || memcmp(ids, want_prompt, n_ids * sizeof ids[0]) != 0) {
      fprintf(stderr, "the prompt's token ids differ from the reference\n");
      bad = 1;
    }
    if (result.n_tokens != n_want || memcmp(out, want, n_want * sizeof out[0]) != 0) {
      fprintf(stderr, "the greedy continuation differs from the reference\n");
      bad = 1;
    }
    if (!bad) printf("prompt ids and %zu greedy ids match the reference\n", n_want);
  }
free_llm:
  if (failed(rml_llm_free(llm), "rml_llm_free")) bad = 1;
  return bad;
}

int main(int argc, char **argv) {
  int bad;
  if (argc != 6 && argc != 8) {
    fprintf(stderr, "usage: %s GRAPH.json INPUT.npy EXPECTED.npy MODEL PROMPT [PROMPT_IDS GREEDY_IDS]\n", argv[0]);
    return 2;
  }
  printf("rml %s\n", rml_version());
  bad = run_graph(argv[1], argv[2], argv[3]);
  bad |= chat(argv[4], argv[5], argc == 8 ? argv[6] : NULL, argc == 8 ? argv[7] : NULL);
  printf(bad ? "FAILED\n" : "ok\n");
  return bad;
}
