/* A tiny reader of NumPy .npy files holding little-endian float32 ('<f4') in C
 * order, enough for the rml C API examples. Header-only: include it in one file. */
#ifndef RML_EXAMPLE_NPY_H
#define RML_EXAMPLE_NPY_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rml.h"

typedef struct {
  float *data;                  /* count floats, malloc'd: free() it */
  int64_t dims[RML_MAX_RANK];
  size_t rank;
  size_t count;
} Npy;

/* Reads `path` into `out`; returns 0 on success, prints why and returns -1 if not. */
static int npy_read(const char *path, Npy *out) {
  unsigned char magic[10];
  uint32_t header_len;
  char *header = NULL;
  const char *p;
  FILE *f = fopen(path, "rb");
  memset(out, 0, sizeof *out);
  if (!f) {
    fprintf(stderr, "%s: cannot open\n", path);
    return -1;
  }
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0) goto bad;
  if (magic[6] == 1) {
    if (fread(magic + 8, 1, 2, f) != 2) goto bad;
    header_len = (uint32_t)magic[8] | ((uint32_t)magic[9] << 8);
  } else {
    unsigned char n[4];
    if (fread(n, 1, 4, f) != 4) goto bad;
    header_len = (uint32_t)n[0] | ((uint32_t)n[1] << 8) | ((uint32_t)n[2] << 16) | ((uint32_t)n[3] << 24);
  }
  header = calloc(header_len + 1, 1);
  if (!header || fread(header, 1, header_len, f) != header_len) goto bad;
  if (!strstr(header, "'descr': '<f4'") || !strstr(header, "'fortran_order': False")) {
    fprintf(stderr, "%s: only little-endian float32 in C order is read here\n", path);
    goto fail;
  }
  p = strstr(header, "'shape': (");
  if (!p) goto bad;
  p += strlen("'shape': (");
  out->count = 1;
  while (*p && *p != ')') {
    char *end;
    long long d = strtoll(p, &end, 10);
    if (end == p) break;
    if (out->rank == RML_MAX_RANK || d < 0) goto bad;
    out->dims[out->rank++] = d;
    out->count *= (size_t)d;
    p = end;
    while (*p == ',' || *p == ' ') p++;
  }
  out->data = malloc(out->count * sizeof(float) + 1);
  if (!out->data || fread(out->data, sizeof(float), out->count, f) != out->count) goto bad;
  free(header);
  fclose(f);
  return 0;
bad:
  fprintf(stderr, "%s: not a readable .npy file\n", path);
fail:
  free(header);
  free(out->data);
  out->data = NULL;
  fclose(f);
  return -1;
}

#endif /* RML_EXAMPLE_NPY_H */
