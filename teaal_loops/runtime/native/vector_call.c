/* kernel(prepared, x) for a plain SpMV call in one C step: the native twin of
 * teaal_loops.runtime.vector_call.VectorCall (read that class first; this file does what its
 * __call__ does, in the same order, and nothing else).
 *
 * Why C: on the H100 machines a prepared call cost about 7 us of host time, of which the
 * driver's cuLaunchKernel is about 3.5; the rest was Python: the checks of x, the stream
 * lookup, the output and the launcher's argument array. Here the checks are pointer
 * compares, the kernel's argument array lives on the C stack, and the driver is called
 * through its own address (read once with ctypes, passed in by the Python side).
 *
 * This source is fixed: nothing in it, in its compile command or in its arguments comes from
 * a spec, a matrix or a file name. teaal_loops.runtime.native compiles it once per source,
 * compiler and Python build with the host's C compiler; where it cannot, the Python class
 * runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* CUresult cuLaunchKernel(CUfunction f, unsigned gridX, gridY, gridZ, blockX, blockY,
 * blockZ, unsigned sharedBytes, CUstream stream, void **params, void **extra) */
typedef int (*launch_kernel_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, void *, void **, void **);

/* Leading arguments (the prepared matrix's arrays and scalars) plus x, y, owner, scratch. */
#define MAX_ARGUMENTS 64

typedef struct {
    PyObject_HEAD
    PyObject *ndarray_type; /* cupy.ndarray: x must be exactly this type */
    PyObject *dtype;        /* the kernel's numpy dtype: compared by identity */
    Py_ssize_t cols;        /* x's length */
    PyObject *current_stream; /* cupy.cuda.get_current_stream */
    PyObject *outputs;      /* vector_call.OutputVectors (readable as .outputs) */
    PyObject *new_output;   /* outputs.new(stream, pointer) -> y */
    PyObject *scratch;      /* StreamScratch.pointer(stream pointer) -> int, or None */
    PyObject *on_error;     /* on_error(status): raises the package's DeviceError */
    PyObject *keep;         /* what the argument addresses point into (kept alive) */
    launch_kernel_t launch; /* NULL: nothing to launch (an empty grid) */
    void *function;         /* CUfunction */
    unsigned grid, block;
    int leading;            /* how many leading arguments */
    void *leading_address[MAX_ARGUMENTS];
    uintptr_t owner;        /* the address passed for the unused owner pointer */
} VectorCall;

static PyObject *str_dtype, *str_shape, *str_c_contiguous, *str_data, *str_ptr;

/* obj.data.ptr as an address; -1 and an exception on failure */
static int device_pointer(PyObject *array, uintptr_t *out)
{
    PyObject *data = PyObject_GetAttr(array, str_data);
    if (data == NULL)
        return -1;
    PyObject *ptr = PyObject_GetAttr(data, str_ptr);
    Py_DECREF(data);
    if (ptr == NULL)
        return -1;
    *out = (uintptr_t)PyLong_AsUnsignedLongLongMask(ptr);
    Py_DECREF(ptr);
    return PyErr_Occurred() ? -1 : 0;
}

/* 1: x is a C-contiguous CuPy vector of our dtype and length; 0: it is not (the caller's
 * general path handles it); -1: an exception */
static int plain_vector(VectorCall *self, PyObject *x)
{
    if ((PyObject *)Py_TYPE(x) != self->ndarray_type)
        return 0;
    PyObject *dtype = PyObject_GetAttr(x, str_dtype);
    if (dtype == NULL)
        return -1;
    Py_DECREF(dtype); /* still owned by x: only its identity is used */
    if (dtype != self->dtype)
        return 0;
    PyObject *shape = PyObject_GetAttr(x, str_shape);
    if (shape == NULL)
        return -1;
    int ok = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == 1;
    if (ok) {
        Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, 0));
        ok = n == self->cols;
    }
    Py_DECREF(shape);
    if (PyErr_Occurred())
        return -1;
    if (!ok)
        return 0;
    PyObject *contiguous = PyObject_GetAttr(x, str_c_contiguous);
    if (contiguous == NULL)
        return -1;
    ok = PyObject_IsTrue(contiguous);
    Py_DECREF(contiguous);
    return ok;
}

static PyObject *VectorCall_call(PyObject *op, PyObject *args, PyObject *kwargs)
{
    VectorCall *self = (VectorCall *)op;
    PyObject *x;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "VectorCall takes x alone");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "VectorCall", 1, 1, &x))
        return NULL;
    int plain = plain_vector(self, x);
    if (plain <= 0) {
        if (plain < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *stream = PyObject_CallNoArgs(self->current_stream);
    if (stream == NULL)
        return NULL;
    PyObject *pointer = PyObject_GetAttr(stream, str_ptr);
    if (pointer == NULL) {
        Py_DECREF(stream);
        return NULL;
    }
    PyObject *y = PyObject_CallFunctionObjArgs(self->new_output, stream, pointer, NULL);
    Py_DECREF(stream);
    if (y == NULL || self->launch == NULL) {
        Py_DECREF(pointer);
        return y;
    }
    void *stream_handle = (void *)(uintptr_t)PyLong_AsUnsignedLongLongMask(pointer);
    uintptr_t trailing[4] = {0, 0, self->owner, 0};
    int count = 3;
    if (PyErr_Occurred() || device_pointer(x, &trailing[0]) || device_pointer(y, &trailing[1]))
        goto fail;
    if (self->scratch != Py_None) {
        PyObject *scratch = PyObject_CallOneArg(self->scratch, pointer);
        if (scratch == NULL)
            goto fail;
        trailing[3] = (uintptr_t)PyLong_AsUnsignedLongLongMask(scratch);
        Py_DECREF(scratch);
        if (PyErr_Occurred())
            goto fail;
        count = 4;
    }
    Py_DECREF(pointer);
    pointer = NULL;
    /* the driver copies the arguments before it returns: an array on this stack will do */
    void *params[MAX_ARGUMENTS + 4];
    for (int i = 0; i < self->leading; i++)
        params[i] = self->leading_address[i];
    for (int i = 0; i < count; i++)
        params[self->leading + i] = &trailing[i];
    int status;
    Py_BEGIN_ALLOW_THREADS /* as CuPy's binding does: other threads run while the driver does */
    status = self->launch(self->function, self->grid, 1, 1, self->block, 1, 1, 0,
                          stream_handle, params, NULL);
    Py_END_ALLOW_THREADS
    if (status != 0) {
        PyObject *raised = PyObject_CallFunction(self->on_error, "i", status);
        Py_XDECREF(raised);
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError, "cuLaunchKernel failed with CUDA driver error %d",
                         status);
        Py_DECREF(y);
        return NULL;
    }
    return y;
fail:
    Py_XDECREF(pointer);
    Py_DECREF(y);
    return NULL;
}

static int VectorCall_init(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"ndarray", "dtype", "cols", "current_stream", "outputs",
                            "scratch", "on_error", "launch", "function", "grid", "block",
                            "leading", "owner", "keep", NULL};
    VectorCall *self = (VectorCall *)op;
    PyObject *ndarray, *dtype, *current_stream, *outputs, *scratch, *on_error, *leading,
        *keep;
    Py_ssize_t cols;
    unsigned long long launch, function, owner;
    unsigned int grid, block;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOnOOOOKKIIOKO", names, &ndarray, &dtype,
                                     &cols, &current_stream, &outputs, &scratch, &on_error,
                                     &launch, &function, &grid, &block, &leading, &owner,
                                     &keep))
        return -1;
    if (!PyType_Check(ndarray) || !PyCallable_Check(current_stream) ||
        !PyCallable_Check(on_error) ||
        (scratch != Py_None && !PyCallable_Check(scratch))) {
        PyErr_SetString(PyExc_TypeError, "VectorCall: a type and callables expected");
        return -1;
    }
    PyObject *new_output = PyObject_GetAttrString(outputs, "new");
    if (new_output == NULL)
        return -1;
    PyObject *addresses = PySequence_Fast(leading, "VectorCall: leading must be a sequence");
    if (addresses == NULL) {
        Py_DECREF(new_output);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(addresses);
    if (n > MAX_ARGUMENTS) {
        Py_DECREF(addresses);
        Py_DECREF(new_output);
        PyErr_SetString(PyExc_ValueError, "VectorCall: too many leading arguments");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long a = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(addresses, i));
        if (PyErr_Occurred()) {
            Py_DECREF(addresses);
            Py_DECREF(new_output);
            return -1;
        }
        self->leading_address[i] = (void *)(uintptr_t)a;
    }
    Py_DECREF(addresses);
    self->leading = (int)n;
    Py_INCREF(ndarray);
    Py_XSETREF(self->ndarray_type, ndarray);
    Py_INCREF(dtype);
    Py_XSETREF(self->dtype, dtype);
    Py_INCREF(current_stream);
    Py_XSETREF(self->current_stream, current_stream);
    Py_XSETREF(self->new_output, new_output); /* the reference GetAttr gave */
    Py_INCREF(outputs);
    Py_XSETREF(self->outputs, outputs);
    Py_INCREF(scratch);
    Py_XSETREF(self->scratch, scratch);
    Py_INCREF(on_error);
    Py_XSETREF(self->on_error, on_error);
    Py_INCREF(keep);
    Py_XSETREF(self->keep, keep);
    self->cols = cols;
    self->launch = (launch_kernel_t)(uintptr_t)launch;
    self->function = (void *)(uintptr_t)function;
    self->grid = grid;
    self->block = block;
    self->owner = (uintptr_t)owner;
    return 0;
}

static int VectorCall_traverse(PyObject *op, visitproc visit, void *arg)
{
    VectorCall *self = (VectorCall *)op;
    Py_VISIT(self->ndarray_type);
    Py_VISIT(self->dtype);
    Py_VISIT(self->current_stream);
    Py_VISIT(self->new_output);
    Py_VISIT(self->outputs);
    Py_VISIT(self->scratch);
    Py_VISIT(self->on_error);
    Py_VISIT(self->keep);
    return 0;
}

static int VectorCall_clear(PyObject *op)
{
    VectorCall *self = (VectorCall *)op;
    Py_CLEAR(self->ndarray_type);
    Py_CLEAR(self->dtype);
    Py_CLEAR(self->current_stream);
    Py_CLEAR(self->new_output);
    Py_CLEAR(self->outputs);
    Py_CLEAR(self->scratch);
    Py_CLEAR(self->on_error);
    Py_CLEAR(self->keep);
    return 0;
}

static void VectorCall_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    VectorCall_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *VectorCall_outputs(PyObject *op, void *closure)
{
    (void)closure;
    PyObject *outputs = ((VectorCall *)op)->outputs;
    if (outputs == NULL)
        Py_RETURN_NONE;
    Py_INCREF(outputs);
    return outputs;
}

static PyGetSetDef VectorCall_getset[] = {
    {"outputs", VectorCall_outputs, NULL,
     "the vector_call.OutputVectors this call takes its outputs from", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject VectorCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "teaal_loops_vector_call.VectorCall",
    .tp_doc = "kernel(prepared, x) in one C step (see teaal_loops.runtime.vector_call.VectorCall)",
    .tp_basicsize = sizeof(VectorCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = VectorCall_init,
    .tp_call = VectorCall_call,
    .tp_getset = VectorCall_getset,
    .tp_traverse = VectorCall_traverse,
    .tp_clear = VectorCall_clear,
    .tp_dealloc = VectorCall_dealloc,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "teaal_loops_vector_call",
    .m_doc = "The native twin of teaal_loops.runtime.vector_call.VectorCall",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit_teaal_loops_vector_call(void)
{
    if (PyType_Ready(&VectorCallType) < 0)
        return NULL;
    str_dtype = PyUnicode_InternFromString("dtype");
    str_shape = PyUnicode_InternFromString("shape");
    str_c_contiguous = PyUnicode_InternFromString("_c_contiguous");
    str_data = PyUnicode_InternFromString("data");
    str_ptr = PyUnicode_InternFromString("ptr");
    if (!str_dtype || !str_shape || !str_c_contiguous || !str_data || !str_ptr)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&VectorCallType);
    if (PyModule_AddObject(m, "VectorCall", (PyObject *)&VectorCallType) < 0) {
        Py_DECREF(&VectorCallType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
