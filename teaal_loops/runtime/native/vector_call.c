/* kernel(prepared, x) for a plain SpMV call in one C step: the native twins of
 * teaal_loops.runtime.vector_call.VectorCall and of the OutputVectors it takes its outputs
 * from (read those classes first; this file does what they do, in the same order, and
 * nothing else).
 *
 * Why C: on the H100 machines a prepared call cost about 7 us of host time, of which the
 * driver's cuLaunchKernel is about 3.5 and a new CuPy array about 1.2; the rest was Python:
 * the checks of x, the stream lookup, the batch bookkeeping and the launcher's argument
 * array. Here the checks are pointer compares, an output's slot is claimed in C, the kernel's
 * argument array lives on the C stack, and the driver is called through its own address
 * (read once with ctypes, passed in by the Python side).
 *
 * This source is fixed: nothing in it, in its compile command or in its arguments comes from
 * a spec, a matrix or a file name. teaal_loops.runtime.native compiles it once per source,
 * compiler and Python build with the host's C compiler; where it cannot, the Python classes
 * run.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

#ifdef Py_GIL_DISABLED
/* An output's slot is claimed by C code that no other thread can interleave with only while
 * the GIL is held; without a GIL the build fails and the Python classes run instead. */
#error "the native one-step call needs the GIL"
#endif

/* CUresult cuLaunchKernel(CUfunction f, unsigned gridX, gridY, gridZ, blockX, blockY,
 * blockZ, unsigned sharedBytes, CUstream stream, void **params, void **extra) */
typedef int (*launch_kernel_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, void *, void **, void **);

static PyObject *str_dtype, *str_shape, *str_c_contiguous, *str_data, *str_ptr, *str_mem;

/* ---- OutputVectors: the native twin of vector_call.OutputVectors (the same rules; read the
 * Python class's docstring for why outputs come in batches) ---- */

typedef struct {
    PyObject_HEAD
    PyObject *ndarray_type;   /* cupy.ndarray */
    PyObject *memory_pointer; /* cupy.cuda.MemoryPointer(mem, offset) */
    PyObject *alloc;          /* cupy.cuda.alloc(size) -> a MemoryPointer */
    PyObject *memset;         /* cupy.cuda.runtime.memsetAsync(ptr, value, size, stream) */
    PyObject *capturing;      /* cupy.cuda.runtime.streamIsCapturing(stream) */
    PyObject *get_device;     /* cupy.cuda.runtime.getDevice() */
    PyObject *shape;          /* the output's shape, (n,) */
    PyObject *dtype;
    Py_ssize_t nbytes;        /* an output's bytes */
    Py_ssize_t slot, count;   /* a slot's bytes; slots a batch (0: no batches) */
    int zeroed;
    /* the batch, replaced as a whole with no Python code run in between: its memory (NULL:
     * none yet; slot * count bytes), a weak reference to the stream object it was cut on, its
     * device and the next offset to hand out */
    PyObject *batch_memory;
    PyObject *batch_stream;
    long batch_device;
    Py_ssize_t next;
} OutputVectors;

static PyTypeObject OutputVectorsType;

/* the object a weak reference points to, as a new reference (None when it is gone) */
static PyObject *weak_target(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *target;
    if (PyWeakref_GetRef(ref, &target) < 0)
        return NULL;
    if (target == NULL)
        Py_RETURN_NONE;
    return target;
#else
    PyObject *target = PyWeakref_GetObject(ref);
    Py_XINCREF(target);
    return target;
#endif
}

/* ndarray(shape, dtype[, pointer]) */
static PyObject *new_array(OutputVectors *self, PyObject *pointer)
{
    PyObject *args[3] = {self->shape, self->dtype, pointer};
    return PyObject_Vectorcall(self->ndarray_type, args, pointer ? 3 : 2, NULL);
}

/* memsetAsync(memory_pointer.ptr, 0, size, stream): 0, or -1 and an exception */
static int zero(OutputVectors *self, PyObject *memory_pointer, Py_ssize_t size, PyObject *stream)
{
    PyObject *ptr = PyObject_GetAttr(memory_pointer, str_ptr);
    if (ptr == NULL)
        return -1;
    PyObject *done = PyObject_CallFunction(self->memset, "OinO", ptr, 0, size, stream);
    Py_DECREF(ptr);
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    return 0;
}

/* 1: the stream is capturing a graph, 0: it is not (the legacy default stream, 0, never is);
 * an error asking counts as capturing, as in the Python class; -1: an exception that is not
 * an Exception (KeyboardInterrupt) */
static int in_capture(OutputVectors *self, PyObject *pointer, uintptr_t handle)
{
    if (handle == 0)
        return 0;
    PyObject *answer = PyObject_CallOneArg(self->capturing, pointer);
    int capturing = answer == NULL ? -1 : PyObject_IsTrue(answer);
    Py_XDECREF(answer);
    if (capturing >= 0)
        return capturing;
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return -1;
    PyErr_Clear();
    return 1;
}

/* a new batch on this stream and device; its first slot is the output */
static PyObject *new_batch(OutputVectors *self, PyObject *stream, PyObject *pointer, long device)
{
    Py_ssize_t size = self->slot * self->count;
    PyObject *memory = PyObject_CallFunction(self->alloc, "n", size);
    if (memory == NULL)
        return NULL;
    PyObject *mem = NULL, *ref = NULL, *y = NULL;
    if (self->zeroed && zero(self, memory, size, pointer) < 0)
        goto done;
    mem = PyObject_GetAttr(memory, str_mem);
    if (mem == NULL)
        goto done;
    ref = PyWeakref_NewRef(stream, NULL);
    if (ref == NULL)
        goto done;
    y = new_array(self, memory);
    if (y == NULL)
        goto done;
    /* the new batch replaces the old in one step; the old objects are let go after it */
    PyObject *old_memory = self->batch_memory, *old_stream = self->batch_stream;
    self->batch_memory = mem;
    self->batch_stream = ref;
    self->batch_device = device;
    self->next = self->slot;
    mem = ref = NULL;
    Py_XDECREF(old_memory);
    Py_XDECREF(old_stream);
done:
    Py_XDECREF(mem);
    Py_XDECREF(ref);
    Py_DECREF(memory);
    return y;
}

/* 1: the batch has a slot left and was cut on this stream object and device; 0: it has not;
 * -1: an exception. Runs no Python code. */
static int batch_fits(OutputVectors *self, PyObject *stream, long device)
{
    if (self->batch_memory == NULL || self->next >= self->slot * self->count ||
        device != self->batch_device)
        return 0;
    PyObject *owner = weak_target(self->batch_stream);
    if (owner == NULL)
        return -1;
    int same = owner == stream;
    Py_DECREF(owner); /* still referenced elsewhere: it was alive */
    return same;
}

/* ndarray(shape, dtype, MemoryPointer(memory, offset)) */
static PyObject *array_at(OutputVectors *self, PyObject *memory, Py_ssize_t offset)
{
    PyObject *at = PyLong_FromSsize_t(offset);
    if (at == NULL)
        return NULL;
    PyObject *args[2] = {memory, at};
    PyObject *memptr = PyObject_Vectorcall(self->memory_pointer, args, 2, NULL);
    Py_DECREF(at);
    if (memptr == NULL)
        return NULL;
    PyObject *y = new_array(self, memptr);
    Py_DECREF(memptr);
    return y;
}

/* the next slot of the batch cut on this stream object and device, else a new batch */
static PyObject *from_batch(OutputVectors *self, PyObject *stream, PyObject *pointer)
{
    PyObject *answer = PyObject_CallNoArgs(self->get_device);
    if (answer == NULL)
        return NULL;
    long device = PyLong_AsLong(answer);
    Py_DECREF(answer);
    if (device == -1 && PyErr_Occurred())
        return NULL;
    /* no Python code runs from here to the claim, so each slot is handed out once */
    int fits = batch_fits(self, stream, device);
    if (fits < 0)
        return NULL;
    if (!fits)
        return new_batch(self, stream, pointer, device);
    Py_ssize_t offset = self->next;
    self->next += self->slot;
    PyObject *memory = self->batch_memory;
    Py_INCREF(memory); /* another thread may replace the batch meanwhile */
    PyObject *y = array_at(self, memory, offset);
    Py_DECREF(memory);
    return y;
}

/* OutputVectors.new(stream, pointer): a new output on ``stream`` (CuPy's current stream, whose
 * raw pointer the caller read), zero where this factory zeroes */
static PyObject *outputs_new(OutputVectors *self, PyObject *stream, PyObject *pointer,
                             uintptr_t handle)
{
    if (self->count) {
        int capture = self->zeroed ? in_capture(self, pointer, handle) : 0;
        if (capture < 0)
            return NULL;
        if (!capture)
            return from_batch(self, stream, pointer);
    }
    PyObject *y = new_array(self, NULL);
    if (y == NULL || !self->zeroed)
        return y;
    PyObject *data = PyObject_GetAttr(y, str_data);
    int failed = data == NULL || zero(self, data, self->nbytes, pointer) < 0;
    Py_XDECREF(data);
    if (failed)
        Py_CLEAR(y);
    return y;
}

static PyObject *OutputVectors_new_method(PyObject *op, PyObject *const *args, Py_ssize_t n)
{
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "new(stream, pointer) takes two arguments");
        return NULL;
    }
    uintptr_t handle = (uintptr_t)PyLong_AsUnsignedLongLongMask(args[1]);
    if (PyErr_Occurred())
        return NULL;
    return outputs_new((OutputVectors *)op, args[0], args[1], handle);
}

static int OutputVectors_init(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"ndarray", "memory_pointer", "alloc", "memset", "capturing",
                            "get_device", "shape", "dtype", "nbytes", "zeroed", "slot",
                            "count", NULL};
    OutputVectors *self = (OutputVectors *)op;
    PyObject *ndarray, *memory_pointer, *alloc, *memset, *capturing, *get_device, *shape,
        *dtype;
    Py_ssize_t nbytes, slot, count;
    int zeroed;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOnpnn", names, &ndarray,
                                     &memory_pointer, &alloc, &memset, &capturing,
                                     &get_device, &shape, &dtype, &nbytes, &zeroed, &slot,
                                     &count))
        return -1;
    if (!PyCallable_Check(ndarray) || !PyCallable_Check(memory_pointer) ||
        !PyCallable_Check(alloc) || !PyCallable_Check(memset) ||
        !PyCallable_Check(capturing) || !PyCallable_Check(get_device) ||
        !PyTuple_Check(shape) || nbytes < 0 || slot < 0 || count < 0 ||
        (count && (slot < nbytes || slot > PY_SSIZE_T_MAX / count))) {
        PyErr_SetString(PyExc_ValueError, "OutputVectors: callables, a shape and sizes expected");
        return -1;
    }
    PyObject *keep[] = {ndarray, memory_pointer, alloc, memset, capturing, get_device, shape,
                        dtype};
    PyObject **slots[] = {&self->ndarray_type, &self->memory_pointer, &self->alloc,
                          &self->memset, &self->capturing, &self->get_device, &self->shape,
                          &self->dtype};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        Py_INCREF(keep[i]);
        Py_XSETREF(*slots[i], keep[i]);
    }
    Py_CLEAR(self->batch_memory);
    Py_CLEAR(self->batch_stream);
    self->nbytes = nbytes;
    self->slot = slot;
    self->count = count;
    self->zeroed = zeroed;
    self->next = 0;
    return 0;
}

static int OutputVectors_traverse(PyObject *op, visitproc visit, void *arg)
{
    OutputVectors *self = (OutputVectors *)op;
    Py_VISIT(self->ndarray_type);
    Py_VISIT(self->memory_pointer);
    Py_VISIT(self->alloc);
    Py_VISIT(self->memset);
    Py_VISIT(self->capturing);
    Py_VISIT(self->get_device);
    Py_VISIT(self->shape);
    Py_VISIT(self->dtype);
    Py_VISIT(self->batch_memory);
    Py_VISIT(self->batch_stream);
    return 0;
}

static int OutputVectors_clear(PyObject *op)
{
    OutputVectors *self = (OutputVectors *)op;
    Py_CLEAR(self->ndarray_type);
    Py_CLEAR(self->memory_pointer);
    Py_CLEAR(self->alloc);
    Py_CLEAR(self->memset);
    Py_CLEAR(self->capturing);
    Py_CLEAR(self->get_device);
    Py_CLEAR(self->shape);
    Py_CLEAR(self->dtype);
    Py_CLEAR(self->batch_memory);
    Py_CLEAR(self->batch_stream);
    return 0;
}

static void OutputVectors_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    OutputVectors_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *OutputVectors_stream(PyObject *op, void *closure)
{
    (void)closure;
    OutputVectors *self = (OutputVectors *)op;
    if (self->batch_stream == NULL)
        Py_RETURN_NONE;
    return weak_target(self->batch_stream);
}

static PyMethodDef OutputVectors_methods[] = {
    {"new", (PyCFunction)(void (*)(void))OutputVectors_new_method, METH_FASTCALL,
     "new(stream, pointer): a new output on stream (see vector_call.OutputVectors.new)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef OutputVectors_getset[] = {
    {"stream", OutputVectors_stream, NULL,
     "the stream the current batch was cut on (None: no batch, or its stream is gone)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject OutputVectorsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "teaal_loops_vector_call.OutputVectors",
    .tp_doc = "new outputs in batches (see teaal_loops.runtime.vector_call.OutputVectors)",
    .tp_basicsize = sizeof(OutputVectors),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = OutputVectors_init,
    .tp_methods = OutputVectors_methods,
    .tp_getset = OutputVectors_getset,
    .tp_traverse = OutputVectors_traverse,
    .tp_clear = OutputVectors_clear,
    .tp_dealloc = OutputVectors_dealloc,
};

/* ---- VectorCall ---- */

/* Leading arguments (the prepared matrix's arrays and scalars) plus x, y, owner, scratch. */
#define MAX_ARGUMENTS 64

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall; /* call(x) without an argument tuple */
    PyObject *ndarray_type; /* cupy.ndarray: x must be exactly this type */
    PyObject *dtype;        /* the kernel's numpy dtype: compared by identity */
    Py_ssize_t cols;        /* x's length */
    PyObject *current_stream; /* cupy.cuda.get_current_stream */
    PyObject *outputs;      /* OutputVectors, native or Python (readable as .outputs) */
    PyObject *new_output;   /* outputs.new(stream, pointer) -> y, where outputs is Python's */
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

static PyObject *VectorCall_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                                       PyObject *kwnames)
{
    VectorCall *self = (VectorCall *)op;
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "VectorCall takes x alone");
        return NULL;
    }
    PyObject *x = args[0];
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
    uintptr_t handle = (uintptr_t)PyLong_AsUnsignedLongLongMask(pointer);
    PyObject *y = NULL;
    if (!PyErr_Occurred())
        y = Py_IS_TYPE(self->outputs, &OutputVectorsType)
                ? outputs_new((OutputVectors *)self->outputs, stream, pointer, handle)
                : PyObject_CallFunctionObjArgs(self->new_output, stream, pointer, NULL);
    Py_DECREF(stream);
    if (y == NULL || self->launch == NULL) {
        Py_DECREF(pointer);
        return y;
    }
    void *stream_handle = (void *)handle;
    uintptr_t trailing[4] = {0, 0, self->owner, 0};
    int count = 3;
    if (device_pointer(x, &trailing[0]) || device_pointer(y, &trailing[1]))
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

static PyObject *VectorCall_create(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *op = PyType_GenericNew(type, args, kwargs);
    if (op != NULL)
        ((VectorCall *)op)->vectorcall = VectorCall_vectorcall;
    return op;
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
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(VectorCall, vectorcall),
    .tp_new = VectorCall_create,
    .tp_init = VectorCall_init,
    .tp_call = PyVectorcall_Call,
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
    if (PyType_Ready(&VectorCallType) < 0 || PyType_Ready(&OutputVectorsType) < 0)
        return NULL;
    str_dtype = PyUnicode_InternFromString("dtype");
    str_shape = PyUnicode_InternFromString("shape");
    str_c_contiguous = PyUnicode_InternFromString("_c_contiguous");
    str_data = PyUnicode_InternFromString("data");
    str_ptr = PyUnicode_InternFromString("ptr");
    str_mem = PyUnicode_InternFromString("mem");
    if (!str_dtype || !str_shape || !str_c_contiguous || !str_data || !str_ptr || !str_mem)
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
    Py_INCREF(&OutputVectorsType);
    if (PyModule_AddObject(m, "OutputVectors", (PyObject *)&OutputVectorsType) < 0) {
        Py_DECREF(&OutputVectorsType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
