/*
** bpcc.h — the public interface of libbpcc, the backend-pattern fusion and config compiler.
**
** bpcc loads a neural-network graph (an FX-compatible IR, stored as a line-oriented text file
** plus a safetensors weights file), and compiles it through the quantization flow that
** PyTorch's torch.ao.quantization.quantize_fx defines: fuse -> prepare -> calibrate -> convert.
** This header is the manual. Everything a caller can do is declared here; nothing else is
** exported from the library.
**
** A first program: load a model, walk its graph, report problems the way the CLI does.
**
**     #include <bpcc.h>
**     #include <stdio.h>
**
**     int main(int argc, char **argv)
**     {
**         struct bpcc_diag diag;
**         struct bpcc_graph *g = NULL;
**         bpcc_diag_init(&diag);
**         if (bpcc_graph_load(argv[1], &g, &diag) != BPCC_OK) {
**             char buf[2048];
**             for (uint32_t i = 0; i < diag.n_entries; i++) {
**                 bpcc_diag_format(&diag.entries[i], buf, sizeof buf);
**                 fputs(buf, stderr);
**             }
**             return 1;
**         }
**         for (struct bpcc_node *n = bpcc_graph_first(g); n; n = bpcc_node_next(n))
**             printf("%s = %s %s (%u users)\n", bpcc_node_name(n),
**                    bpcc_node_kind_name(bpcc_node_kind(n)), bpcc_node_target(n),
**                    bpcc_node_n_users(n));
**         bpcc_graph_free(g);
**         return 0;
**     }
**
** Build it with:  cc prog.c $(pkg-config --cflags --libs bpcc)
**
** Conventions
** - Every fallible call returns enum bpcc_status (BPCC_OK = 0) and, when it fails, fills the
**   caller-owned struct bpcc_diag with the location and the message. The library never prints,
**   never exits, and never aborts on bad input.
** - Results come back through trailing *_out pointers.
** - Ownership is stated per parameter: "borrowed" (the library keeps no pointer after the call),
**   "copied" (the library keeps its own copy), or "owned by the graph" (lives until
**   bpcc_graph_free; never free it yourself).
** - A graph owns its memory: nodes, values, names, modules and tensor data created through the
**   graph's functions live in its arenas (one for the nodes, one for the rest) and are released
**   together by bpcc_graph_free.
** - Strings handed out by the library (names, targets) are interned per graph: two equal strings
**   from the same graph are the same pointer.
** - The passes (bpcc_fuse, bpcc_prepare, bpcc_calibrate, bpcc_convert) change their graph in place
**   when they succeed and leave it exactly as it was when they fail, out of memory included
**   (node, module and tensor pointers taken before a failed pass are then stale: look them up by
**   name again).
*/
#ifndef BPCC_H
#define BPCC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(BPCC_BUILDING) && defined(__GNUC__)
#define BPCC_API __attribute__((visibility("default")))
#else
#define BPCC_API
#endif

#define BPCC_VERSION_MAJOR 0
#define BPCC_VERSION_MINOR 1
#define BPCC_VERSION_PATCH 0

/* The library's version string, e.g. "0.1.0". */
BPCC_API const char *bpcc_version(void);

/* {====================================================================================
** Status and diagnostics
** ==================================================================================== */

/* Append-only: values never change meaning. */
enum bpcc_status {
    BPCC_OK = 0,
    BPCC_ERR_NOMEM = 1,    /* an allocation failed; nothing was changed                       */
    BPCC_ERR_IO = 2,       /* a file could not be opened, read, written or renamed            */
    BPCC_ERR_PARSE = 3,    /* a text file (model, YAML) is malformed                          */
    BPCC_ERR_FORMAT = 4,   /* a binary file (safetensors) is malformed or inconsistent        */
    BPCC_ERR_GRAPH = 5,    /* the graph breaks an IR invariant (see bpcc_graph_verify)        */
    BPCC_ERR_INVALID = 6,  /* an argument to a library call is invalid (caller's mistake)     */
    BPCC_ERR_CONFIG = 7,   /* a backend or qconfig file is invalid                            */
    BPCC_ERR_LIMIT = 8,    /* input exceeds a hard limit (size, depth, count)                 */
    BPCC_ERR_INTERNAL = 9, /* a bug in bpcc                                                    */
    BPCC_STATUS_COUNT
};

/* "ok", "out of memory", ... */
BPCC_API const char *bpcc_status_name(enum bpcc_status s);

enum bpcc_severity { BPCC_SEV_ERROR = 0, BPCC_SEV_WARNING = 1, BPCC_SEV_NOTE = 2 };

#define BPCC_DIAG_FILE_MAX 256
#define BPCC_DIAG_MSG_MAX 384
#define BPCC_DIAG_MAX_ENTRIES 20

/*
** One message. Positions are 1-based; line == 0 means "no line" (then, for binary files,
** has_offset says whether `offset` holds the byte offset the problem was found at).
** A message may carry one note with its own position: the enclosing construct.
*/
struct bpcc_diag_entry {
    enum bpcc_severity severity;
    enum bpcc_status code;
    char file[BPCC_DIAG_FILE_MAX];
    uint32_t line, col;
    bool has_offset;
    uint64_t offset;
    char msg[BPCC_DIAG_MSG_MAX];
    bool has_note;
    uint32_t note_line, note_col;
    char note[BPCC_DIAG_MSG_MAX];
};

/*
** Caller-owned diagnostic sink. The first BPCC_DIAG_MAX_ENTRIES messages are kept; later ones
** are only counted. `code` is the status of the first error (BPCC_OK while there is none).
*/
struct bpcc_diag {
    enum bpcc_status code;
    uint32_t n_errors, n_warnings;
    uint32_t n_entries;
    struct bpcc_diag_entry entries[BPCC_DIAG_MAX_ENTRIES];
};

BPCC_API void bpcc_diag_init(struct bpcc_diag *d);

/*
** Format one entry as compilers do, into buf (always NUL-terminated, truncated to n):
**   "file:line:col: error: msg\n" (+ "file:line:col: note: note\n")
** Binary-file positions print as "file: offset N: error: msg". Returns the length that the full
** text would have (like snprintf).
*/
BPCC_API size_t bpcc_diag_format(const struct bpcc_diag_entry *e, char *buf, size_t n);

/* }==================================================================================== */

/* {====================================================================================
** Allocation hook
** All memory the library allocates goes through these three functions (libyaml's internal
** buffers excepted). Set them before any other call; NULL restores malloc/realloc/free.
** The default functions, on Linux, advise the kernel to back blocks of 2 MiB and more with
** transparent huge pages (madvise MADV_HUGEPAGE; it does nothing where they are off or not
** built in). A large graph's memory is then faulted in 2 MiB at a time: at a million nodes,
** 676k page faults become ~20k, and loading, the passes and printing take ~35 % less time
** (docs/PERFORMANCE.md). BPCC_HUGE_PAGES=0 in the environment (read when the library is loaded)
** turns the advice off; your own functions get none. Smaller blocks (activations, most folded
** weights) live in malloc's heap: a process that starts with GLIBC_TUNABLES=glibc.malloc.hugetlb=1
** has glibc put its heap on huge pages too. The bpcc tool does the same with functions of its own
** here, which advise the heap as it grows (src/cli/process.c; a `bpcc quantize` of mobilenet_v2:
** 0.094 -> 0.068 s where page faults are dear).
** ==================================================================================== */

struct bpcc_allocator {
    void *(*malloc_fn)(void *ud, size_t size);
    void *(*realloc_fn)(void *ud, void *ptr, size_t size);
    void (*free_fn)(void *ud, void *ptr);
    void *ud;
};

BPCC_API void bpcc_set_allocator(const struct bpcc_allocator *a /* copied; NULL = default */);

/* }==================================================================================== */

/* {====================================================================================
** Element types
** ==================================================================================== */

/* Append-only. The quantized types are stored in safetensors as their integer carrier. */
enum bpcc_dtype {
    BPCC_DTYPE_NONE = 0,
    BPCC_DTYPE_F32,
    BPCC_DTYPE_F64,
    BPCC_DTYPE_F16,
    BPCC_DTYPE_BF16,
    BPCC_DTYPE_I64,
    BPCC_DTYPE_I32,
    BPCC_DTYPE_I16,
    BPCC_DTYPE_I8,
    BPCC_DTYPE_U8,
    BPCC_DTYPE_BOOL,
    BPCC_DTYPE_QUINT8,  /* torch.quint8, carrier U8  */
    BPCC_DTYPE_QINT8,   /* torch.qint8,  carrier I8  */
    BPCC_DTYPE_QINT32,  /* torch.qint32, carrier I32 */
    BPCC_DTYPE_QUINT4X2, /* torch.quint4x2: configs only, no tensor storage (size 0) */
    BPCC_DTYPE_COUNT
};

BPCC_API const char *bpcc_dtype_name(enum bpcc_dtype t);       /* torch name: "float32", "quint8" */
BPCC_API const char *bpcc_dtype_short_name(enum bpcc_dtype t); /* IR name: "f32", "qu8"          */
BPCC_API size_t bpcc_dtype_size(enum bpcc_dtype t);            /* bytes per element; 0 for NONE  */
/* Look up by torch name ("float32", "torch.float32", "float", "quint8") or IR short name. */
BPCC_API enum bpcc_dtype bpcc_dtype_from_name(const char *name);

/* }==================================================================================== */

/* {====================================================================================
** Values: the literal trees of node arguments, kwargs and module attributes
** ==================================================================================== */

enum bpcc_value_kind {
    BPCC_VAL_NONE = 0,  /* None                                                   */
    BPCC_VAL_BOOL,      /* True / False                                           */
    BPCC_VAL_INT,       /* 64-bit signed                                          */
    BPCC_VAL_FLOAT,     /* double; inf and nan allowed                            */
    BPCC_VAL_STR,       /* UTF-8 string                                           */
    BPCC_VAL_NODE,      /* a reference to a node of the same graph                */
    BPCC_VAL_LIST,      /* [a, b]                                                 */
    BPCC_VAL_TUPLE,     /* (a, b)                                                 */
    BPCC_VAL_DICT,      /* {key: value}, string keys, insertion order kept        */
    BPCC_VAL_SLICE,     /* slice(start, stop, step): three items                  */
    BPCC_VAL_DTYPE,     /* torch.float32                                          */
    BPCC_VAL_ELLIPSIS,  /* ...                                                    */
    BPCC_VAL_SYMBOL,    /* a named constant: torch.contiguous_format, torch.per_channel_affine */
    BPCC_VAL_DEVICE,    /* device("cpu")                                          */
    BPCC_VAL_TTYPE,     /* a tensor type, only in node metadata: f32[1, 3, 8, 8]  */
    BPCC_VAL_ATTR,      /* a get_attr node left implicit (bpcc_graph_set_implicit_qparams) */
    BPCC_VAL_COUNT
};

#define BPCC_MAX_DIMS 8

struct bpcc_node;

/*
** A value. Sequences (list, tuple, slice, dict values) point at an array of `n` items; dicts
** also at `n` keys. Values reachable from a graph are owned by the graph.
*/
struct bpcc_value {
    enum bpcc_value_kind kind;
    uint32_t n;                     /* item count for LIST, TUPLE, DICT, SLICE (3); dims for TTYPE */
    union {
        bool b;
        int64_t i;
        double f;
        const char *s;              /* STR, SYMBOL, DEVICE */
        struct bpcc_node *node;     /* NODE */
        enum bpcc_dtype dtype;      /* DTYPE */
        struct {                    /* LIST, TUPLE, SLICE, DICT */
            struct bpcc_value *items;
            const char **keys;      /* DICT only */
        } seq;
        struct {                    /* TTYPE: n dims, owned like a sequence's items */
            enum bpcc_dtype dtype;
            const int64_t *dims;
        } ttype;
        struct {                    /* ATTR: the implicit node's name and its target (both interned) */
            const char *name, *target;
        } attr;
    } u;
};                                  /* 24 bytes: values are the bulk of a graph's memory */

/* Scalars need no allocation. */
BPCC_API struct bpcc_value bpcc_value_none(void);
BPCC_API struct bpcc_value bpcc_value_bool(bool b);
BPCC_API struct bpcc_value bpcc_value_int(int64_t i);
BPCC_API struct bpcc_value bpcc_value_float(double f);
BPCC_API struct bpcc_value bpcc_value_node(struct bpcc_node *n);
BPCC_API struct bpcc_value bpcc_value_dtype(enum bpcc_dtype t);

/* Value kind name: "none", "int", "tuple", ... */
BPCC_API const char *bpcc_value_kind_name(enum bpcc_value_kind k);

/* Structural equality (node references compare by identity, floats bit-exactly). */
BPCC_API bool bpcc_value_equal(const struct bpcc_value *a, const struct bpcc_value *b);

/* Item i of a LIST/TUPLE/SLICE/DICT, NULL when out of range or not a sequence. */
BPCC_API const struct bpcc_value *bpcc_value_item(const struct bpcc_value *v, uint32_t i);
/* Value of `key` in a DICT, NULL when absent. */
BPCC_API const struct bpcc_value *bpcc_value_get(const struct bpcc_value *dict, const char *key);

/* }==================================================================================== */

/* {====================================================================================
** Graphs
** ==================================================================================== */

struct bpcc_graph;
struct bpcc_module;
struct bpcc_tensor;

/* Append-only. Names as in torch.fx: "placeholder", "get_attr", ... */
enum bpcc_node_kind {
    BPCC_NODE_PLACEHOLDER = 0,
    BPCC_NODE_GET_ATTR,
    BPCC_NODE_CALL_MODULE,
    BPCC_NODE_CALL_FUNCTION,
    BPCC_NODE_CALL_METHOD,
    BPCC_NODE_OUTPUT,
    BPCC_NODE_KIND_COUNT
};

BPCC_API const char *bpcc_node_kind_name(enum bpcc_node_kind k);
/* Returns BPCC_NODE_KIND_COUNT for an unknown name. */
BPCC_API enum bpcc_node_kind bpcc_node_kind_from_name(const char *name);

/* A new, empty graph (returned, free with bpcc_graph_free). */
BPCC_API enum bpcc_status bpcc_graph_new(struct bpcc_graph **out, struct bpcc_diag *d);
BPCC_API void bpcc_graph_free(struct bpcc_graph *g);
/*
** The passes (fuse, prepare, calibrate, convert) leave a graph as it was when they fail. Fuse,
** prepare and convert keep an undo log while they run: each change to a node or module that was
** there before records what it overwrites, and a failure (out of memory included, also for the
** log itself) plays the log back. Node and module pointers taken before a failed pass stay valid
** and mean what they meant; those it made are gone. Calibrate needs no log (it prepares all it
** stores before storing any). The log costs a few records per object a pass changes (time, and
** memory until the pass ends: about 10 % of the peak on a 1M-node graph). A caller that discards
** the graph after any failed pass, as the bpcc tool does, can turn rollback off: a failed pass
** then leaves the graph fit only for bpcc_graph_free, and the memory of the nodes erased while it
** is off (by a pass or by bpcc_node_erase) becomes the nodes made after the next pass ends, so a
** pointer to such a node must not be used after that; likewise convert then gives the memory of
** each observer module it replaces (with its tensors' headers and the data the graph made for
** them) to what it makes next, so a pointer to an observer module or its tensors taken before
** convert must not be used after it;
** fuse does so with each module it prunes (a batch norm folded away, a part a fused module copied),
** which prepare's observers then take, so a pointer to such a module or its tensors taken before
** fuse must not be used after it;
** and batch-norm folding gives the pages of each float weight and bias it replaces back to the
** kernel where they lie in the weights file's mapping (a model then holds one copy of its conv
** weights, not two), so such a tensor's data must not be read after fuse (it reads as the file's
** bytes, not as anything written into it since the load); one that a module was given since the
** load (bpcc_module_set_tensor) keeps its pages. On for every new graph.
*/
BPCC_API void bpcc_graph_set_rollback(struct bpcc_graph *g, bool on);

/*
** Intern a string in the graph (copied). The result lives as long as the graph. NULL on
** out-of-memory.
*/
BPCC_API const char *bpcc_graph_intern(struct bpcc_graph *g, const char *s);

/*
** Sequence builders: an array of n items (LIST, TUPLE, DICT) owned by the graph, all None.
** Fill items (and, for DICT, keys — interned with bpcc_graph_intern) before using the value.
*/
BPCC_API enum bpcc_status bpcc_value_seq_new(struct bpcc_graph *g, enum bpcc_value_kind kind,
                                             uint32_t n, struct bpcc_value *out);
/* A STR, SYMBOL or DEVICE value holding a copy of s. */
BPCC_API enum bpcc_status bpcc_value_str_new(struct bpcc_graph *g, enum bpcc_value_kind kind,
                                             const char *s, struct bpcc_value *out);

/*
** Create a node and append it at the end of the graph (move it with bpcc_node_move_before/
** _after). `name` may be NULL or taken: a unique name is then derived FX-style ("add_1").
** `target` is copied (interned). `args` must be a TUPLE (or NULL for ()), `kwargs` a DICT (or NULL
** for {}); both are deep-copied into the graph, and every node they reference gains this node
** as a user. Node references must belong to g.
*/
BPCC_API enum bpcc_status bpcc_graph_create_node(struct bpcc_graph *g, enum bpcc_node_kind kind,
                                                 const char *name, const char *target,
                                                 const struct bpcc_value *args,
                                                 const struct bpcc_value *kwargs,
                                                 struct bpcc_node **out, struct bpcc_diag *d);

BPCC_API struct bpcc_node *bpcc_graph_first(const struct bpcc_graph *g);
BPCC_API struct bpcc_node *bpcc_graph_last(const struct bpcc_graph *g);
BPCC_API uint32_t bpcc_graph_n_nodes(const struct bpcc_graph *g);
BPCC_API struct bpcc_node *bpcc_graph_find_node(const struct bpcc_graph *g, const char *name);
/* The output node, NULL if there is none. */
BPCC_API struct bpcc_node *bpcc_graph_output(const struct bpcc_graph *g);

BPCC_API struct bpcc_node *bpcc_node_next(const struct bpcc_node *n);
BPCC_API struct bpcc_node *bpcc_node_prev(const struct bpcc_node *n);
BPCC_API const char *bpcc_node_name(const struct bpcc_node *n);
BPCC_API const char *bpcc_node_target(const struct bpcc_node *n);
BPCC_API enum bpcc_node_kind bpcc_node_kind(const struct bpcc_node *n);
/* A stable number, unique in its graph, assigned at creation. */
BPCC_API uint32_t bpcc_node_id(const struct bpcc_node *n);
/* Always a TUPLE / a DICT. Owned by the graph; change them only through bpcc_node_set_args. */
BPCC_API const struct bpcc_value *bpcc_node_args(const struct bpcc_node *n);
BPCC_API const struct bpcc_value *bpcc_node_kwargs(const struct bpcc_node *n);

/* Distinct users in first-use order (torch.fx's node.users). */
BPCC_API uint32_t bpcc_node_n_users(const struct bpcc_node *n);
BPCC_API struct bpcc_node *bpcc_node_user(const struct bpcc_node *n, uint32_t i);

/* Metadata from shape propagation: a TTYPE, a TUPLE/LIST of metas, or NONE when unknown. */
BPCC_API const struct bpcc_value *bpcc_node_meta(const struct bpcc_node *n);
BPCC_API enum bpcc_status bpcc_node_set_meta(struct bpcc_node *n, const struct bpcc_value *meta,
                                             struct bpcc_diag *d);
/* The module the node was traced in (PyTorch's node_name_to_scope): its dotted path, and its type
** in *type_out. NULL (and *type_out NULL) for the root scope. Set when parsed from `@ path : type`
** or by bpcc_node_set_scope (path NULL or "" resets to the root scope); both strings are copied. */
BPCC_API const char *bpcc_node_scope(const struct bpcc_node *n, const char **type_out);
BPCC_API enum bpcc_status bpcc_node_set_scope(struct bpcc_node *n, const char *path, const char *type,
                                              struct bpcc_diag *d);

/* Replace args and/or kwargs (NULL keeps the current one); use-def is updated. */
BPCC_API enum bpcc_status bpcc_node_set_args(struct bpcc_node *n, const struct bpcc_value *args,
                                             const struct bpcc_value *kwargs, struct bpcc_diag *d);
/* Retarget (interned copy). */
BPCC_API enum bpcc_status bpcc_node_set_target(struct bpcc_node *n, const char *target,
                                               struct bpcc_diag *d);

/* Every use of `from` becomes a use of `to`; *n_changed_out (may be NULL) = users changed.
** On failure nothing is changed. */
BPCC_API enum bpcc_status bpcc_node_replace_all_uses(struct bpcc_node *from, struct bpcc_node *to,
                                                     uint32_t *n_changed_out,
                                                     struct bpcc_diag *d);

/* The uses of `from` in `user`'s args and kwargs become uses of `to` (torch.fx's
** replace_input_with). Nothing changes when `user` does not use `from`. */
BPCC_API enum bpcc_status bpcc_node_replace_input(struct bpcc_node *user, struct bpcc_node *from,
                                                  struct bpcc_node *to, struct bpcc_diag *d);

/* Move n just before / after `anchor` in graph order. */
BPCC_API void bpcc_node_move_before(struct bpcc_node *n, struct bpcc_node *anchor);
BPCC_API void bpcc_node_move_after(struct bpcc_node *n, struct bpcc_node *anchor);

/* Remove a node that has no users (BPCC_ERR_INVALID otherwise). Its name stays reserved. With
** rollback off, its memory is used again after the next pass (bpcc_graph_set_rollback). */
BPCC_API enum bpcc_status bpcc_node_erase(struct bpcc_node *n, struct bpcc_diag *d);

/*
** Reorder the nodes topologically, keeping the current order wherever it is already valid.
** BPCC_ERR_GRAPH (naming a node on the cycle) when the graph has a cycle.
*/
BPCC_API enum bpcc_status bpcc_graph_topo_sort(struct bpcc_graph *g, struct bpcc_diag *d);

/*
** Check the IR invariants: every node reference is to a live node of this graph that comes
** earlier; names are unique; exactly one output node, and it is last; users lists agree with
** the arguments; call_module targets name modules; get_attr targets resolve to a module, a
** module tensor or a module attribute; tensors agree with their declared type.
** All violations are reported (first BPCC_DIAG_MAX_ENTRIES kept).
*/
BPCC_API enum bpcc_status bpcc_graph_verify(const struct bpcc_graph *g, struct bpcc_diag *d);

/* }==================================================================================== */

/* {====================================================================================
** Modules and tensors
** A graph carries a module table like a torch.fx.GraphModule: dotted names -> type, attributes
** (a DICT value) and tensors. Submodules are modules whose name extends their parent's
** ("layer1.0" holds "layer1.0.conv1"); the root module is named "".
** ==================================================================================== */

enum bpcc_tensor_role {
    BPCC_TENSOR_PARAM = 0, /* nn.Parameter          */
    BPCC_TENSOR_BUFFER,    /* registered buffer     */
    BPCC_TENSOR_CONSTANT,  /* plain tensor attribute */
    BPCC_TENSOR_ROLE_COUNT
};

BPCC_API const char *bpcc_tensor_role_name(enum bpcc_tensor_role r); /* "param", "buffer", "constant" */

/* Add a module (name and type copied). BPCC_ERR_INVALID when the name is taken. */
BPCC_API enum bpcc_status bpcc_graph_add_module(struct bpcc_graph *g, const char *name,
                                                const char *type, struct bpcc_module **out,
                                                struct bpcc_diag *d);
BPCC_API struct bpcc_module *bpcc_graph_find_module(const struct bpcc_graph *g, const char *name);
/* Modules in insertion order. */
BPCC_API uint32_t bpcc_graph_n_modules(const struct bpcc_graph *g);
BPCC_API struct bpcc_module *bpcc_graph_module(const struct bpcc_graph *g, uint32_t i);
/* Remove a module (with its tensors and its submodules) from the table. */
BPCC_API enum bpcc_status bpcc_graph_remove_module(struct bpcc_graph *g, const char *name,
                                                   struct bpcc_diag *d);

BPCC_API const char *bpcc_module_name(const struct bpcc_module *m);
BPCC_API const char *bpcc_module_type(const struct bpcc_module *m);
/* All attributes, a DICT. */
BPCC_API const struct bpcc_value *bpcc_module_attrs(const struct bpcc_module *m);
BPCC_API const struct bpcc_value *bpcc_module_attr(const struct bpcc_module *m, const char *key);
/* Set (or add, keeping insertion order) one attribute; value deep-copied. No node references. */
BPCC_API enum bpcc_status bpcc_module_set_attr(struct bpcc_module *m, const char *key,
                                               const struct bpcc_value *v, struct bpcc_diag *d);

BPCC_API uint32_t bpcc_module_n_tensors(const struct bpcc_module *m);
/* Tensor i with its attribute name and role. */
BPCC_API struct bpcc_tensor *bpcc_module_tensor_at(const struct bpcc_module *m, uint32_t i,
                                                   const char **name_out,
                                                   enum bpcc_tensor_role *role_out);
BPCC_API struct bpcc_tensor *bpcc_module_tensor(const struct bpcc_module *m, const char *name);
/*
** Attach tensor t (created in the same graph) as attribute `name` with `role`; an existing
** tensor of that name is replaced.
*/
BPCC_API enum bpcc_status bpcc_module_set_tensor(struct bpcc_module *m, const char *name,
                                                 enum bpcc_tensor_role role, struct bpcc_tensor *t,
                                                 struct bpcc_diag *d);

/* A new zero-filled tensor owned by the graph. */
BPCC_API enum bpcc_status bpcc_tensor_new(struct bpcc_graph *g, enum bpcc_dtype dtype,
                                          uint32_t ndim, const int64_t *dims /* borrowed */,
                                          struct bpcc_tensor **out, struct bpcc_diag *d);
BPCC_API enum bpcc_dtype bpcc_tensor_dtype(const struct bpcc_tensor *t);
BPCC_API uint32_t bpcc_tensor_ndim(const struct bpcc_tensor *t);
BPCC_API const int64_t *bpcc_tensor_dims(const struct bpcc_tensor *t);
BPCC_API uint64_t bpcc_tensor_numel(const struct bpcc_tensor *t);
BPCC_API size_t bpcc_tensor_nbytes(const struct bpcc_tensor *t);
/* Element data, little-endian, row-major, aligned to the element size. NULL if unbound. The
** caller may write it: what the library derived from the data (the per-channel range batch-norm
** folding keeps for convert's weight observers) is forgotten here, so later passes read it anew. */
BPCC_API void *bpcc_tensor_data(struct bpcc_tensor *t);

/*
** Quantization parameters as a model carries them (docs/SHOW.md): read, never copied; the
** tensors belong to the graph.
*/
enum bpcc_qparams_kind {
    BPCC_QPARAMS_NONE = 0,
    BPCC_QPARAMS_PER_TENSOR,  /* one scale and zero point                          */
    BPCC_QPARAMS_PER_CHANNEL, /* n of each, along `axis`                           */
    BPCC_QPARAMS_DYNAMIC,     /* quantize_per_tensor_dynamic: computed at run time  */
    BPCC_QPARAMS_FLOAT16      /* a cast to float16 (activations or weights)         */
};
struct bpcc_qparams {
    enum bpcc_qparams_kind kind;
    enum bpcc_dtype dtype;      /* quint8, qint8, qint32, quint4x2; float16           */
    int64_t axis;               /* the channel dimension when per channel, else -1   */
    uint64_t n;                 /* scale / zero point pairs: 1 per tensor, 0 if none */
    const struct bpcc_tensor *scale, *zero_point; /* NULL when given as literals     */
    double scale_value;         /* the literal values (quantize_per_tensor(x, 0.1, 3, ...)) */
    int64_t zero_point_value;
};
/* The i-th scale and zero point (zero points are integers except for float-qparams weights). */
BPCC_API double bpcc_qparams_scale(const struct bpcc_qparams *q, uint64_t i);
BPCC_API double bpcc_qparams_zero_point(const struct bpcc_qparams *q, uint64_t i);
BPCC_API const char *bpcc_qparams_kind_name(enum bpcc_qparams_kind k); /* "per_tensor" ... */
/* One line for people: "quint8 scale=0.0236 zp=3", "qint8 axis=0 x64 scale=0.0011..0.0052 zp=0",
** "dynamic quint8", "float16"; empty for BPCC_QPARAMS_NONE. Truncated to size. */
BPCC_API void bpcc_qparams_format(const struct bpcc_qparams *q, char *buf, size_t size);
/*
** The activation qparams a node applies: quantize_per_tensor / quantize_per_channel (scale and
** zero point from get_attr tensors or literals), quantize_per_tensor_dynamic, .to(float16), or
** a call of a calibrated observer module (its scale and zero_point tensors). false otherwise.
*/
BPCC_API bool bpcc_node_qparams(const struct bpcc_graph *g, const struct bpcc_node *n, struct bpcc_qparams *out);
/* A reference quantized module's weight qparams (weight_qscheme, weight_dtype, weight_scale,
** weight_zero_point, weight_axis); false when m has none. */
BPCC_API bool bpcc_module_weight_qparams(const struct bpcc_module *m, struct bpcc_qparams *out);
/* The same for the weight named `weight`: <weight>_qscheme, <weight>_dtype, <weight>_scale,
** <weight>_zero_point, <weight>_axis. The reference LSTM and cells of dynamic quantization keep
** one set per weight ("weight_ih_l0", "weight_hh_l0_reverse"; a cell's "weight_ih", "weight_hh");
** bpcc_module_weight_qparams is this for "weight". */
BPCC_API bool bpcc_module_weight_qparams_of(const struct bpcc_module *m, const char *weight, struct bpcc_qparams *out);
/* Those weights one by one: the next parameter `weight_*` of m from tensor index *i on that has
** qparams of its own, with its name; *i moves past it (start at 0). false when none is left.
**   for (uint32_t i = 0; bpcc_module_next_weight_qparams(m, &i, &name, &q);) ... */
BPCC_API bool bpcc_module_next_weight_qparams(const struct bpcc_module *m, uint32_t *i, const char **name,
                                              struct bpcc_qparams *out);
/* The module whose weight a call_module node quantizes: the called module, or the reference
** module inside a fused container; NULL when there is none. */
BPCC_API const struct bpcc_module *bpcc_node_weight_module(const struct bpcc_graph *g, const struct bpcc_node *n);

/* }==================================================================================== */

/* {====================================================================================
** Model files: IR text (docs/FORMAT.md) + safetensors weights
** ==================================================================================== */

/*
** Load a model: parse the IR text at `path`, map the weights file it names (relative to the
** text file's directory), bind and check every declared tensor, and verify the graph.
*/
BPCC_API enum bpcc_status bpcc_graph_load(const char *path, struct bpcc_graph **out,
                                          struct bpcc_diag *d);

/*
** Parse IR text only (no weights are read; tensors stay unbound). `filename` is used in
** messages and may be NULL.
*/
BPCC_API enum bpcc_status bpcc_graph_parse(const char *text, size_t len, const char *filename,
                                           struct bpcc_graph **out, struct bpcc_diag *d);

/*
** Print the canonical IR text (returned in *text_out, free with bpcc_free). Printing a parsed
** canonical file gives back the same bytes. `weights_name` is the file name written on the
** `weights` line (NULL: the name the graph was loaded with, or none when there are no tensors).
*/
BPCC_API enum bpcc_status bpcc_graph_print(const struct bpcc_graph *g, const char *weights_name,
                                           char **text_out, size_t *len_out, struct bpcc_diag *d);

/*
** The same text written to fp as it is made, a megabyte at a time, never held whole (a model of a
** million nodes prints ~350 MB). Write errors are left on fp: check ferror/fclose after.
*/
BPCC_API enum bpcc_status bpcc_graph_print_to(const struct bpcc_graph *g, const char *weights_name, FILE *fp,
                                              struct bpcc_diag *d);

/*
** Save a model: the weights to <path without extension>.safetensors and the text to path. Each
** file is written to a temporary file in the same directory and renamed over the target, so a
** failure leaves any existing files untouched and no partial file behind. Both are streamed (the
** text and the weights' header a megabyte at a time): saving holds neither whole in memory.
**
** Whatever stops the process — an error, a signal, a crash — leaves the old files or the new
** ones. A power failure is another matter: like compilers and torch.save, bpcc_graph_save does not
** wait for the disk. bpcc_graph_save_ex with BPCC_WRITE_SYNC does: each file's data is on the disk
** (fsync) before it is renamed, and the rename is after (the directory's fsync), at the disk's
** cost (resnet18's 47 MB of weights: ~45 ms more). Other flags are BPCC_ERR_INVALID.
*/
#define BPCC_WRITE_SYNC 1u
BPCC_API enum bpcc_status bpcc_graph_save(const struct bpcc_graph *g, const char *path,
                                          struct bpcc_diag *d);
BPCC_API enum bpcc_status bpcc_graph_save_ex(const struct bpcc_graph *g, const char *path, unsigned flags,
                                             struct bpcc_diag *d);

/* Release memory returned by the library (bpcc_graph_print, bpcc_graph_to_json ...). */
BPCC_API void bpcc_free(void *p);
/* Write len bytes to path atomically (a temporary beside it, renamed when complete); flags as
** bpcc_graph_save_ex's. */
BPCC_API enum bpcc_status bpcc_write_file(const char *path, const void *data, size_t len,
                                          struct bpcc_diag *d);
BPCC_API enum bpcc_status bpcc_write_file_ex(const char *path, const void *data, size_t len, unsigned flags,
                                             struct bpcc_diag *d);
/* Remove the temporary files of the outputs being written (the hidden `.NAME.tmpXXXXXX` beside
** each target), leaving the targets as they were. Async-signal-safe: for a program's handler of
** SIGINT or SIGTERM, which would otherwise leave them behind (the library installs no handler;
** the bpcc tool does). Saves in progress in other threads then fail. */
BPCC_API void bpcc_remove_partial_outputs(void);

/*
** A JSON description of the model (nodes, modules, tensors; shape documented in docs/SHOW.md),
** returned in *json_out (free with bpcc_free). `indent` 0 prints compactly.
*/
BPCC_API enum bpcc_status bpcc_graph_to_json(const struct bpcc_graph *g, int indent,
                                             char **json_out, struct bpcc_diag *d);

/* {------------------------------------------------------------------------------------
** safetensors, on their own (the model loader uses these)
** ------------------------------------------------------------------------------------ */

struct bpcc_safetensors;

/* Map and validate a safetensors file (returned, free with bpcc_safetensors_close). */
BPCC_API enum bpcc_status bpcc_safetensors_open(const char *path, struct bpcc_safetensors **out,
                                                struct bpcc_diag *d);
BPCC_API void bpcc_safetensors_close(struct bpcc_safetensors *st);
BPCC_API uint32_t bpcc_safetensors_count(const struct bpcc_safetensors *st);
/*
** Tensor i in file order (by data offset): its name, dtype (the safetensors dtype mapped to
** bpcc's: F32 -> BPCC_DTYPE_F32 ...), shape and data (aligned copy when the file's is not).
*/
BPCC_API enum bpcc_status bpcc_safetensors_get(const struct bpcc_safetensors *st, uint32_t i,
                                               const char **name_out, enum bpcc_dtype *dtype_out,
                                               uint32_t *ndim_out, const int64_t **dims_out,
                                               const void **data_out, size_t *nbytes_out);
/* Index of the tensor named `name` (a hash lookup), or UINT32_MAX. */
BPCC_API uint32_t bpcc_safetensors_find(const struct bpcc_safetensors *st, const char *name);

/* }==================================================================================== */

/* {====================================================================================
** Backend pattern configs (docs/CONFIG.md)
** A backend config is a YAML file in PyTorch's BackendPatternConfig schema, or one of the
** built-in backends (native, fbgemm, qnnpack, x86, onednn, tensorrt, executorch). Loading
** resolves `extends`, validates everything (all problems of a file are reported) and compiles
** the entries into a registry ordered as PyTorch orders them.
** ==================================================================================== */

struct bpcc_config;

struct bpcc_config_options {
    bool strict; /* unknown op names are errors instead of warnings */
};

/* `name_or_path`: a built-in name, or a path to a YAML file. opts may be NULL. */
BPCC_API enum bpcc_status bpcc_config_load(const char *name_or_path,
                                           const struct bpcc_config_options *opts,
                                           struct bpcc_config **out, struct bpcc_diag *d);
/* From text; `filename` (may be NULL) names it in messages and anchors relative `extends`. */
BPCC_API enum bpcc_status bpcc_config_load_text(const char *text, size_t len, const char *filename,
                                                const struct bpcc_config_options *opts,
                                                struct bpcc_config **out, struct bpcc_diag *d);
BPCC_API void bpcc_config_free(struct bpcc_config *c);

/* The built-in backends' names (static storage). */
BPCC_API const char *const *bpcc_config_builtin_names(uint32_t *n_out);
BPCC_API const char *bpcc_config_name(const struct bpcc_config *c);
/* Entries of the effective config (after extends and overrides). */
BPCC_API uint32_t bpcc_config_n_patterns(const struct bpcc_config *c);

/* Canonical YAML of the effective config: loading it and dumping again gives the same bytes. */
BPCC_API enum bpcc_status bpcc_config_dump_yaml(const struct bpcc_config *c, char **text_out,
                                                struct bpcc_diag *d);
/* JSON of the effective config (docs/CONFIG.md); indent 0 prints compactly. */
BPCC_API enum bpcc_status bpcc_config_dump_json(const struct bpcc_config *c, int indent,
                                                char **text_out, struct bpcc_diag *d);
/* Added / removed / changed patterns from a to b, as text; *n_changes_out may be NULL. */
BPCC_API enum bpcc_status bpcc_config_diff(const struct bpcc_config *a, const struct bpcc_config *b,
                                           char **text_out, uint32_t *n_changes_out,
                                           struct bpcc_diag *d);

/* }==================================================================================== */

/* {====================================================================================
** QConfig mappings (docs/QCONFIG.md): PyTorch's QConfigMapping in YAML, or a built-in one
** (fbgemm, qnnpack, x86, onednn = get_default_qconfig_mapping(name) of PyTorch 1.13).
** ==================================================================================== */

struct bpcc_qconfig_mapping;

/* `name_or_path`: a built-in name or a YAML file; opts (may be NULL): strict op names. */
BPCC_API enum bpcc_status bpcc_qconfig_load(const char *name_or_path,
                                            const struct bpcc_config_options *opts,
                                            struct bpcc_qconfig_mapping **out, struct bpcc_diag *d);
BPCC_API enum bpcc_status bpcc_qconfig_load_text(const char *text, size_t len, const char *filename,
                                                 const struct bpcc_config_options *opts,
                                                 struct bpcc_qconfig_mapping **out,
                                                 struct bpcc_diag *d);
BPCC_API void bpcc_qconfig_free(struct bpcc_qconfig_mapping *m);
/* The file the mapping was read from (a built-in's shipped name, e.g. "fbgemm.yaml"). */
BPCC_API const char *bpcc_qconfig_file(const struct bpcc_qconfig_mapping *m);
BPCC_API const char *const *bpcc_qconfig_builtin_names(uint32_t *n_out);
/* Every rule with its observers as constructed (defaults applied, effective quant range). */
BPCC_API enum bpcc_status bpcc_qconfig_dump_json(const struct bpcc_qconfig_mapping *m, int indent,
                                                 char **text_out, struct bpcc_diag *d);

/* The qconfig of every node of a (fused) graph, as prepare_fx's generate_qconfig_map decides it:
** global < object_type < module_name_regex < module_name < module_name_object_type_order, with
** functions and methods in the module scope they were traced in (bpcc_node_scope) and fused
** modules taking their parts' object_type qconfig (an error if the parts disagree, as in
** PyTorch). Graph and mapping must outlive the assignment. Entries are in graph order. */
enum bpcc_qc_origin {
    BPCC_QC_NOT_APPLICABLE = 0,  /* placeholder, output: never given a qconfig */
    BPCC_QC_DEFAULT,             /* no rule and no global: stays float */
    BPCC_QC_GLOBAL,
    BPCC_QC_OBJECT_TYPE,
    BPCC_QC_FUSED_OBJECT_TYPE,   /* object_type of a fused module's parts */
    BPCC_QC_MODULE_NAME_REGEX,
    BPCC_QC_MODULE_NAME,
    BPCC_QC_MODULE_NAME_OBJECT_TYPE_ORDER
};
struct bpcc_qconfig_assignment;
BPCC_API enum bpcc_status bpcc_qconfig_assign(const struct bpcc_graph *g, const struct bpcc_qconfig_mapping *m,
                                              struct bpcc_qconfig_assignment **out, struct bpcc_diag *d);
BPCC_API void bpcc_qconfig_assignment_free(struct bpcc_qconfig_assignment *a);
BPCC_API uint32_t bpcc_qconfig_assignment_count(const struct bpcc_qconfig_assignment *a);
BPCC_API const struct bpcc_node *bpcc_qconfig_assignment_node(const struct bpcc_qconfig_assignment *a, uint32_t i);
/* Whether entry i has a qconfig (false: the node stays float). */
BPCC_API bool bpcc_qconfig_assignment_quantized(const struct bpcc_qconfig_assignment *a, uint32_t i);
/* The kind of rule that decided entry i, and its line in the mapping file (0 for none). */
BPCC_API enum bpcc_qc_origin bpcc_qconfig_assignment_origin(const struct bpcc_qconfig_assignment *a, uint32_t i,
                                                            uint32_t *line_out);
BPCC_API const char *bpcc_qc_origin_name(enum bpcc_qc_origin o);
/* {"qconfig_mapping": name, "nodes": [{name, op, target, qconfig (as bpcc_qconfig_dump_json writes
** one, null = float), rule: {kind, type|regex|name, file, line}}]}. */
BPCC_API enum bpcc_status bpcc_qconfig_assignment_json(const struct bpcc_qconfig_assignment *a, int indent,
                                                       char **out, struct bpcc_diag *d);

/* }==================================================================================== */

/* {====================================================================================
** Fusion (PyTorch's fuse_fx with a backend config; docs/FUSE.md)
** ==================================================================================== */

struct bpcc_fuse_options {
    bool is_qat; /* prepare_qat_fx's fusion: batch norms stay, in ConvBn* / ConvBnReLU* modules */
};

/*
** Replace every match of a pattern that has a fuser method by its fused module: the fused call
** keeps the root node's name and takes the last matched node's place and users; batch norms are
** folded into the weights in eval mode. Matching follows PyTorch: from the output toward the
** inputs, longest patterns first, interior nodes with a single user, exact module types.
** `explain_out` (may be NULL) receives one line per fused group (free with bpcc_free). On
** failure the graph is left as it was.
*/
BPCC_API enum bpcc_status bpcc_fuse(struct bpcc_graph *g, const struct bpcc_config *c,
                                    const struct bpcc_fuse_options *opts, char **explain_out,
                                    struct bpcc_diag *d);

/*
** Your own fuser methods. A config names one as `fuser_method: NAME`; when its pattern matches,
** the fuser must create the fused module (and any submodules "PATH.0", ...) at `root_path` with
** bpcc_graph_add_module & co.: the module that was there has been taken out of the table, and
** `modules` holds the matched modules as they were before fusion. The graph itself is rewired
** by bpcc. Register before loading the configs that use it; registrations are process-wide and
** a later one of the same name wins.
*/
struct bpcc_fuser_call {
    struct bpcc_graph *graph;
    bool is_qat;
    const char *root_path;                    /* where the fused module goes */
    const char *fused_module;                 /* the config entry's fused_module, or NULL */
    uint32_t n_ops;                           /* matched ops, pattern preorder (anchor first) */
    const char *const *op_types;              /* module type, or function/method name, per op */
    const struct bpcc_module *const *modules; /* module per op; NULL for functions, methods */
    void *user_data;
};
typedef enum bpcc_status (*bpcc_fuser_fn)(const struct bpcc_fuser_call *call, struct bpcc_diag *d);
BPCC_API enum bpcc_status bpcc_fuser_register(const char *name, uint32_t min_ops, uint32_t max_ops,
                                              bpcc_fuser_fn fn, void *user_data,
                                              struct bpcc_diag *d);

/* }==================================================================================== */

/* {====================================================================================
** Prepare (PyTorch 1.13's prepare_fx on a fused graph; docs/PREPARE.md)
** ==================================================================================== */

struct bpcc_prepare_options {
    bool strict; /* a matched node whose qconfig the backend rejects is an error, not float */
    /* PrepareCustomConfig: graph inputs (by placeholder position) that arrive quantized (quint8,
    ** observed outside the graph), and whether the graph output leaves quantized (quint8) */
    const uint32_t *input_quantized;
    uint32_t n_input_quantized;
    bool output_quantized;
};

/*
** Insert observers as prepare_fx does: each node gets its qconfig (bpcc_qconfig_assign), the
** backend's patterns are matched over the (fused) graph, each match is checked against its dtype
** configs (a rejected one stays float), and observers become call_module nodes of modules
** "activation_post_process_<n>" (type torch.ao.quantization.<Observer>, constructor arguments as
** attributes) on the edges PyTorch observes. Observers that PyTorch shares (cat, pooling, reshape
** ...) are one module called from several nodes. A fixed-qparams op (sigmoid, tanh, softmax,
** hardsigmoid) whose qconfig is not its fixed-qparams observer is refused, as in PyTorch.
** `report_out` (may be NULL) receives what was decided, for bpcc_prepare_plan_json and
** bpcc_prepare_explain (NULL where none is wanted: the report records every observer, about 100
** bytes each, which prepare then does not keep); it refers to g, c and m, which must outlive it, and describes g as prepare
** left it: read it before bpcc_convert, which turns the observer nodes into dequantize nodes.
*/
struct bpcc_prepare_report;
BPCC_API enum bpcc_status bpcc_prepare(struct bpcc_graph *g, const struct bpcc_config *c,
                                       const struct bpcc_qconfig_mapping *m,
                                       const struct bpcc_prepare_options *opts,
                                       struct bpcc_prepare_report **report_out, struct bpcc_diag *d);
BPCC_API void bpcc_prepare_report_free(struct bpcc_prepare_report *r);
/* The plan: {"backend", "qconfig_mapping", "groups": [{pattern, config, nodes, root, last,
** quantized}], "observers": [{name, module, observer (spec), observes, users, role}]}, in graph
** order; stable for diffs. */
BPCC_API enum bpcc_status bpcc_prepare_plan_json(const struct bpcc_prepare_report *r, int indent,
                                                 char **out, struct bpcc_diag *d);
/* Per node of the fused graph: its pattern (file:line) or none, its qconfig and the rule that chose
** it, whether it is quantized and, if not, why. Text (json false) or JSON. */
BPCC_API enum bpcc_status bpcc_prepare_explain(const struct bpcc_prepare_report *r, bool json, char **out,
                                               struct bpcc_diag *d);

/* }==================================================================================== */

/* {====================================================================================
** Calibrate and run (the reference interpreter; docs/CALIBRATE.md)
** The interpreter multiplies with OpenBLAS, which the library loads when a model first runs, not
** when the program starts (BPCC_BLAS in the environment names another CBLAS library): OpenBLAS then
** reads OPENBLAS_NUM_THREADS and OPENBLAS_CORETYPE as the environment has them at that moment.
** A run fails with BPCC_ERR_IO when the library cannot be loaded.
** ==================================================================================== */

struct bpcc_calibrate_options {
    int threads;                                               /* OpenBLAS threads (0 or 1: one) */
    void (*progress)(uint32_t done, uint32_t total, void *ud); /* after each batch, may be NULL */
    void *progress_ud;
};

/*
** Run a prepared model on each batch (a safetensors file with one float32 tensor per graph input,
** named after it; integer or bool tensors for inputs such as token ids and masks) so that its
** observers see the activations; every batch is checked before any
** runs. Each observer module then carries its statistics (buffers min_val, max_val) and its
** qparams (tensors scale, zero_point) as PyTorch 1.13's calculate_qparams gives them.
*/
BPCC_API enum bpcc_status bpcc_calibrate(struct bpcc_graph *g, const char *const *batches, uint32_t n_batches,
                                         const struct bpcc_calibrate_options *opts, struct bpcc_diag *d);
/* Start loading the BLAS library on a thread of its own, so that the first model run finds it
** loaded instead of loading it then: a program that will calibrate or run a model calls this before
** it reads and fuses the model (the bpcc tool does, for the verbs that run one: OpenBLAS's ~5 ms
** of set-up then overlap the load and fusion). Set the environment OpenBLAS reads
** (OPENBLAS_NUM_THREADS, OPENBLAS_CORETYPE, BPCC_BLAS) before the call, and do not change it while
** the load may be under way. A run waits for a load under way; a second call, or one after a run,
** does nothing; when no thread can be started, the first run loads the library as without it. */
BPCC_API void bpcc_blas_preload(void);
/* Signal-to-quantization-noise ratio in dB of g's outputs against reference's on the batches:
** 10 log10(sum ref^2 / sum (ref - g)^2) over every output element (+inf when equal). */
BPCC_API enum bpcc_status bpcc_sqnr(const struct bpcc_graph *reference, const struct bpcc_graph *g,
                                    const char *const *batches, uint32_t n_batches, int threads,
                                    double *db_out, struct bpcc_diag *d);
/* Run a model on one batch and write its outputs ("output", or "output.0", "output.1" ... for a
** tuple, "output.<key>" for a dict, nested as "output.0.1") to a safetensors file, atomically;
** BPCC_ERR_GRAPH when the output holds no tensor. */
BPCC_API enum bpcc_status bpcc_run(const struct bpcc_graph *g, const char *batch, const char *out_path, int threads,
                                   struct bpcc_diag *d);

/* }==================================================================================== */

/* {====================================================================================
** Convert (PyTorch 1.13's convert_to_reference_fx; docs/CONVERT.md)
** ==================================================================================== */

/*
** Turn a calibrated model into the reference quantized model: each observer becomes
** quantize_per_tensor / quantize_per_channel (scale and zero point as root buffers "_scale_<n>",
** "_zero_point_<n>" prefixed with the module path) / quantize_per_tensor_dynamic / to(float16),
** followed by dequantize; observers whose neighbours all have null qconfigs, and float ones, are
** dropped. Observed weighted modules (and the root module inside fused modules) become the
** backend's reference_quantized_module with weight_qscheme, weight_dtype, weight_scale,
** weight_zero_point and weight_axis from the qconfig's weight observer. c and m must be those the
** model was prepared with. Counts (may be NULL): quantize points, reference modules.
*/
BPCC_API enum bpcc_status bpcc_convert(struct bpcc_graph *g, const struct bpcc_config *c,
                                       const struct bpcc_qconfig_mapping *m, uint32_t *n_quantized_out,
                                       uint32_t *n_modules_out, struct bpcc_diag *d);

/*
** Convert ends as PyTorch's does, erasing each node that nothing reads (Graph.eliminate_dead_code:
** an unused x.shape, a quantize point nothing reads), but for one kind: an op that changes its
** first argument in place (x.add_(y), F.relu(x, inplace=True), nn.ReLU(inplace=True), MViT's
** _add_shortcut) is kept, with a warning, where its result is unused. PyTorch 1.13 takes such a
** node for pure and erases it, so its converted model no longer computes what the float one does
** (MViT v1 loses its positional embedding, v2 its residual pooling). On, convert erases them as
** PyTorch does (bpcc convert/quantize --erase-unused-in-place; docs/PYTORCH_DIFFERENCES.md).
** Off for every new graph.
*/
BPCC_API void bpcc_graph_set_erase_unused_in_place(struct bpcc_graph *g, bool on);

/*
** For a caller that only saves or runs the converted model, as the bpcc tool does: convert leaves
** implicit the get_attr nodes that read its quantize nodes' scales and zero points. Each such
** argument of a quantize node is then a BPCC_VAL_ATTR value, which names the root buffer (its
** `target`) and the get_attr node PyTorch makes for it (its `name`, reserved among the node names
** as FX numbers them); the buffers themselves are made as ever. bpcc_graph_print / save write the
** get_attr nodes where PyTorch's graph has them (just before their quantize node), so the text is
** the same byte for byte, bpcc_graph_to_json lists them as the nodes they stand for, and the
** interpreter, bpcc_node_qparams and bpcc_graph_verify read the buffers. What is saved is two nodes per quantize point and their making: on a 1M-node model,
** 10 % of the peak memory. What differs: a walk over the node list meets no such get_attr node
** (bpcc_graph_n_nodes does not count them, bpcc_graph_find_node does not find them), and a pass
** run on the converted graph sees ATTR arguments where it would see nodes. Off for every new
** graph.
*/
BPCC_API void bpcc_graph_set_implicit_qparams(struct bpcc_graph *g, bool on);

/* }==================================================================================== */

/* {====================================================================================
** Numeric suite: where the accuracy went (docs/NUMERIC.md)
** ==================================================================================== */

enum bpcc_compare_kind {
    BPCC_COMPARE_WEIGHTS = 0, /* each reference module's dequantized weight against the float one */
    BPCC_COMPARE_OUTPUTS,     /* each node's value in both models on the same batches          */
    BPCC_COMPARE_SHADOW       /* outputs, and each op fed the float model's inputs (its own error) */
};

/* One compared weight or node. Errors accumulate over every element of every batch: the figures
** are those of the concatenated values. x is the float model's, y the quantized model's. */
struct bpcc_compare_row {
    const char *name;          /* weights: the quantized model's module (or module.weight); else the node name */
    const char *float_name;    /* weights: the float module (or module.weight) compared with; else = name */
    const char *what;          /* module type, or the node's target                             */
    uint64_t numel;            /* elements compared (all batches)                               */
    double sqnr_db;            /* 20 log10(||x|| / ||x - y||) as torch.ao.ns.fx.utils.compute_sqnr; +inf if equal */
    double l2_error;           /* ||x - y|| / ||x|| (compute_normalized_l2_error)              */
    double cosine;             /* x.y / (||x|| ||y||) (compute_cosine_similarity)               */
    double max_abs_error;      /* max |x - y|                                                   */
    /* weights: per output channel (the weight qparams' axis, else 0) */
    uint32_t n_channels;
    double min_channel_sqnr_db;
    uint32_t worst_channel;
    /* shadow: the same figures for the op run on the float model's inputs */
    double shadow_sqnr_db, shadow_l2_error, shadow_cosine, shadow_max_abs_error;
};

struct bpcc_compare_report {
    enum bpcc_compare_kind kind;
    uint32_t n_rows;
    struct bpcc_compare_row *rows; /* graph (weights: module) order */
    uint32_t n_batches;
    uint32_t n_unmatched;          /* weights: reference modules without a float counterpart; outputs and
                                   ** shadow: nodes of one name that compute another op in each model (the
                                   ** float model fused for another backend), not compared */
};

/*
** compare_weights: for every module of `quant` that carries weight qparams (a reference quantized
** module, or the one inside a fused container), its weight quantized and dequantized with them
** against the weight of the module of the same name in `float_model`. The reference LSTM and
** cells of dynamic quantization give a row per quantized weight, named "module.weight_ih_l0" (the
** report owns those names). Pass a float model fused for the same backend (bpcc_fuse) so that
** batch norms are folded in both and the figure measures quantization alone.
*/
BPCC_API enum bpcc_status bpcc_compare_weights(const struct bpcc_graph *float_model, const struct bpcc_graph *quant,
                                               struct bpcc_compare_report **out, struct bpcc_diag *d);
/*
** compare_model_outputs / compare_model_stub: run both models on each batch and compare, for every
** node name present in both (fuse the float model for the same backend first), the node's float32
** value as its consumers see it: in the quantized model, after the node's own quantize/dequantize
** when it has one. shadow also runs the quantized model with every such node's value replaced by
** the float model's, so that each op's error is measured on exact inputs (shadow_* fields).
*/
BPCC_API enum bpcc_status bpcc_compare_outputs(const struct bpcc_graph *float_model, const struct bpcc_graph *quant,
                                               const char *const *batches, uint32_t n_batches, int threads, bool shadow,
                                               struct bpcc_compare_report **out, struct bpcc_diag *d);
BPCC_API void bpcc_compare_report_free(struct bpcc_compare_report *r);
/* The report for people: an aligned table, worst SQNR first (shadow reports by their shadow SQNR). */
BPCC_API enum bpcc_status bpcc_compare_report_text(const struct bpcc_compare_report *r, char **out, struct bpcc_diag *d);
/* {"kind", "batches", "rows": [...]} in graph order, each row with its rank (1 = worst). */
BPCC_API enum bpcc_status bpcc_compare_report_json(const struct bpcc_compare_report *r, int indent, char **out,
                                                   struct bpcc_diag *d);
/* A self-contained HTML page: the table and an SVG bar chart of SQNR along the graph, the worst
** nodes highlighted. `title` is shown at the top (e.g. the two file names). */
BPCC_API enum bpcc_status bpcc_compare_report_html(const struct bpcc_compare_report *r, const char *title, char **out,
                                                   struct bpcc_diag *d);

/* }==================================================================================== */

#ifdef __cplusplus
}
#endif

#endif /* BPCC_H */
