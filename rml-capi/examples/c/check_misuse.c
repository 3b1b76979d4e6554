/* Every caller mistake the rml C API promises to catch, made from C: each call must
 * return the expected status code (and leave a message), never crash.
 *
 *   check_misuse GRAPH.json MODEL.gguf
 *
 * GRAPH.json must have one F32 input of shape [B, S, 16] (the bundled transformer
 * block). Exits 1 when any check fails.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rml.h"

static int failures = 0;

/* Checks that `got` is `want` and that the last error says something. */
static void expect(RmlStatus got, RmlStatus want, const char *what) {
  if (got != want) {
    fprintf(stderr, "FAIL %s: got %s, want %s (%s)\n", what, rml_status_name(got), rml_status_name(want),
            rml_last_error());
    failures++;
  } else if (want != RML_STATUS_OK && rml_last_error()[0] == '\0') {
    fprintf(stderr, "FAIL %s: no error message\n", what);
    failures++;
  } else {
    printf("ok   %-44s %s%s%s\n", what, rml_status_name(got), want == RML_STATUS_OK ? "" : ": ",
           want == RML_STATUS_OK ? "" : rml_last_error());
  }
}

static int32_t stop_at_once(const char *text, size_t len, void *user_data) {
  (void)text;
  (void)len;
  ++*(int *)user_data;
  return 1;
}

int main(int argc, char **argv) {
  const char *not_utf8 = "\xff\xfe.json";
  RmlGraph graph = 0, freed_graph = 0, out = 7;
  RmlLlm llm = 0;
  RmlTensorInfo info;
  float x[2 * 5 * 16] = {0};
  int64_t dims[3] = {2, 5, 16}, bad_dims[3] = {2, 5, 15}, negative[3] = {-2, 5, 16};
  int64_t ints[2 * 5 * 16] = {0};
  RmlTensor good = {"x", RML_DTYPE_F32, 3, dims, x, sizeof x}, t;
  uint32_t ids[4], prompt[2] = {1, 2}, past_vocab[2] = {1, 1000000};
  size_t n = 0;
  char text[4];
  int pieces = 0;
  RmlGenerateOptions options = rml_generate_options_default();
  RmlGeneration result;

  if (argc != 3) {
    fprintf(stderr, "usage: %s GRAPH.json MODEL.gguf\n", argv[0]);
    return 2;
  }
  /* Loading. */
  expect(rml_graph_load(NULL, 1, &out), RML_STATUS_NULL_POINTER, "graph_load(NULL path)");
  expect(out == 0 ? RML_STATUS_OK : RML_STATUS_PANIC, RML_STATUS_OK, "a failed load sets *out = 0");
  expect(rml_graph_load(argv[1], 1, NULL), RML_STATUS_NULL_POINTER, "graph_load(NULL out)");
  expect(rml_graph_load(not_utf8, 1, &out), RML_STATUS_INVALID_UTF8, "graph_load(non-UTF-8 path)");
  expect(rml_graph_load("no/such/graph.json", 1, &out), RML_STATUS_LOAD, "graph_load(missing file)");
  expect(rml_graph_load(argv[2], 1, &out), RML_STATUS_LOAD, "graph_load(a GGUF file)");
  expect(rml_llm_load(not_utf8, &llm), RML_STATUS_INVALID_UTF8, "llm_load(non-UTF-8 path)");
  expect(rml_llm_load(argv[1], &llm), RML_STATUS_LOAD, "llm_load(a graph file)");
  expect(rml_graph_load(argv[1], 1, &graph), RML_STATUS_OK, "graph_load");
  expect(rml_llm_load(argv[2], &llm), RML_STATUS_OK, "llm_load");

  /* Handles: null, forged, foreign, freed. */
  expect(rml_graph_input_count(0, &n), RML_STATUS_INVALID_HANDLE, "graph_input_count(0)");
  expect(rml_graph_input_count(12345, &n), RML_STATUS_INVALID_HANDLE, "graph_input_count(forged)");
  expect(rml_graph_run(llm, &good, 1), RML_STATUS_INVALID_HANDLE, "graph_run(an LLM handle)");
  expect(rml_llm_tokenize(graph, "hi", 0, ids, 4, &n), RML_STATUS_INVALID_HANDLE, "llm_tokenize(a graph handle)");
  expect(rml_graph_load(argv[1], 1, &freed_graph), RML_STATUS_OK, "graph_load (to free)");
  expect(rml_graph_free(freed_graph), RML_STATUS_OK, "graph_free");
  expect(rml_graph_run(freed_graph, &good, 1), RML_STATUS_INVALID_HANDLE, "graph_run(freed)");
  expect(rml_graph_free(freed_graph), RML_STATUS_INVALID_HANDLE, "graph_free(freed twice)");

  /* Tensors: dtype, shape, byte length, pointers, names. */
  expect(rml_graph_get_output(graph, 0, &info, NULL, 0), RML_STATUS_INVALID_ARGUMENT, "get_output before a run");
  t = good, t.dtype = RML_DTYPE_I64, t.data = ints, t.byte_len = sizeof ints;
  expect(rml_graph_run(graph, &t, 1), RML_STATUS_DTYPE, "graph_run(I64 for an F32 input)");
  t = good, t.dtype = 9;
  expect(rml_graph_run(graph, &t, 1), RML_STATUS_DTYPE, "graph_run(unknown dtype code)");
  t = good, t.dims = bad_dims, t.byte_len = 2 * 5 * 15 * sizeof(float);
  expect(rml_graph_run(graph, &t, 1), RML_STATUS_SHAPE, "graph_run(last dim 15, not 16)");
  t = good, t.rank = 2;
  expect(rml_graph_run(graph, &t, 1), RML_STATUS_SHAPE, "graph_run(rank 2)");
  t = good, t.byte_len -= 4;
  expect(rml_graph_run(graph, &t, 1), RML_STATUS_SHAPE, "graph_run(byte_len short)");
  t = good, t.dims = negative;
  expect(rml_graph_run(graph, &t, 1), RML_STATUS_SHAPE, "graph_run(negative dim)");
  t = good, t.rank = 9;
  expect(rml_graph_run(graph, &t, 1), RML_STATUS_SHAPE, "graph_run(rank 9)");
  t = good, t.data = NULL;
  expect(rml_graph_run(graph, &t, 1), RML_STATUS_NULL_POINTER, "graph_run(NULL data)");
  t = good, t.dims = NULL;
  expect(rml_graph_run(graph, &t, 1), RML_STATUS_NULL_POINTER, "graph_run(NULL dims)");
  t = good, t.name = NULL;
  expect(rml_graph_run(graph, &t, 1), RML_STATUS_NULL_POINTER, "graph_run(NULL name)");
  t = good, t.name = not_utf8;
  expect(rml_graph_run(graph, &t, 1), RML_STATUS_INVALID_UTF8, "graph_run(non-UTF-8 name)");
  t = good, t.name = "z";
  expect(rml_graph_run(graph, &t, 1), RML_STATUS_INVALID_ARGUMENT, "graph_run(unknown input name)");
  expect(rml_graph_run(graph, NULL, 1), RML_STATUS_NULL_POINTER, "graph_run(NULL inputs)");
  expect(rml_graph_run(graph, NULL, 0), RML_STATUS_INVALID_ARGUMENT, "graph_run(no inputs)");
  expect(rml_graph_run(graph, &good, 1), RML_STATUS_OK, "graph_run");
  expect(rml_graph_get_output(graph, 0, &info, x, 16), RML_STATUS_BUFFER_TOO_SMALL, "get_output(16-byte buffer)");
  expect(info.byte_len == sizeof x ? RML_STATUS_OK : RML_STATUS_PANIC, RML_STATUS_OK, "  ... still reports byte_len");
  expect(rml_graph_get_output(graph, 1, &info, NULL, 0), RML_STATUS_INVALID_ARGUMENT, "get_output(index 1 of 1)");

  /* The LLM. */
  expect(rml_llm_tokenize(llm, NULL, 0, ids, 4, &n), RML_STATUS_NULL_POINTER, "llm_tokenize(NULL text)");
  expect(rml_llm_tokenize(llm, not_utf8, 0, ids, 4, &n), RML_STATUS_INVALID_UTF8, "llm_tokenize(non-UTF-8 text)");
  expect(rml_llm_tokenize(llm, "hi", 64, ids, 4, &n), RML_STATUS_INVALID_ARGUMENT, "llm_tokenize(unknown flag)");
  expect(rml_llm_tokenize(llm, "The for statement is used to iterate", 0, ids, 2, &n), RML_STATUS_BUFFER_TOO_SMALL,
         "llm_tokenize(2-id buffer)");
  expect(rml_llm_detokenize(llm, prompt, 2, 0, text, 0, &n), RML_STATUS_BUFFER_TOO_SMALL, "llm_detokenize(no room)");
  expect(rml_llm_generate(llm, past_vocab, 2, NULL, NULL, NULL, NULL, 0, NULL), RML_STATUS_INVALID_ARGUMENT,
         "llm_generate(id past the vocabulary)");
  expect(rml_llm_generate(llm, NULL, 2, NULL, NULL, NULL, NULL, 0, NULL), RML_STATUS_NULL_POINTER,
         "llm_generate(NULL prompt)");
  expect(rml_llm_generate(llm, prompt, 0, NULL, NULL, NULL, NULL, 0, NULL), RML_STATUS_INVALID_ARGUMENT,
         "llm_generate(empty prompt)");
  options.temperature = NAN;
  expect(rml_llm_generate(llm, prompt, 2, &options, NULL, NULL, NULL, 0, NULL), RML_STATUS_INVALID_ARGUMENT,
         "llm_generate(NaN temperature)");
  options = rml_generate_options_default();
  options.n_stop_strings = 1;
  expect(rml_llm_generate(llm, prompt, 2, &options, NULL, NULL, NULL, 0, NULL), RML_STATUS_NULL_POINTER,
         "llm_generate(NULL stop strings)");
  options = rml_generate_options_default();
  options.temperature = 0.0f;
  options.stop_at_eos = 0;
  expect(rml_llm_generate(llm, prompt, 2, &options, stop_at_once, &pieces, NULL, 0, &result), RML_STATUS_OK,
         "llm_generate(callback stops)");
  expect(result.stop_reason == RML_STOP_REASON_CANCELLED && pieces == 1 ? RML_STATUS_OK : RML_STATUS_PANIC,
         RML_STATUS_OK, "  ... after one piece, reason CANCELLED");
  expect(rml_llm_free(llm), RML_STATUS_OK, "llm_free");
  expect(rml_llm_generate(llm, prompt, 2, NULL, NULL, NULL, NULL, 0, NULL), RML_STATUS_INVALID_HANDLE,
         "llm_generate(freed)");
  expect(rml_graph_free(graph), RML_STATUS_OK, "graph_free");
  expect(rml_status_name(99)[0] ? RML_STATUS_OK : RML_STATUS_PANIC, RML_STATUS_OK, "status_name(99)");

  printf(failures ? "%d checks FAILED\n" : "all misuse checks passed\n", failures);
  return failures != 0;
}
