"""Public vocabulary of the GPU profiling ecosystems (PyTorch profiler / Kineto, CUDA, HIP, NCCL/RCCL,
cuBLAS, cuDNN, CUTLASS, ``at::native``): exact names and strictly anchored patterns.

Rules (documented in docs/redaction.md):

- exact names wherever a list is known (CUDA/HIP runtime and driver calls, Kineto categories and
  metadata keys, memcpy/memset kinds, profiler structural names);
- patterns only where the ecosystem generates names, and then anchored on both ends with every
  free part constrained (``ProfilerStep#<digits>``, ``aten::<snake_case>``, an autograd node
  ``<Name>Backward<digits>``, an NCCL kernel with its known argument list);
- C++ kernel signatures (``void at::native::reduce_kernel<...>(...)``) are public only when EVERY
  identifier in them is public: a C++ keyword or builtin type, a name in a public namespace
  (:data:`CPP_NAMESPACES`), or a known kernel-name part. One unknown identifier makes the whole
  signature non-public (it is then pseudonymised as a whole).

Nothing here is a bare prefix: ``nccl<free text>``, ``Memcpy HtoD (<free text>)``, a made-up
``cuCanaryKernel`` or ``1.2.3+build`` are not public.
"""

from __future__ import annotations

import re

_CUDA_RUNTIME = """
cudaLaunchKernel cudaLaunchKernelExC cudaLaunchCooperativeKernel cudaLaunchCooperativeKernelMultiDevice
cudaLaunchHostFunc cudaMemcpy cudaMemcpyAsync cudaMemcpy2D cudaMemcpy2DAsync cudaMemcpy3D cudaMemcpy3DAsync
cudaMemcpyPeer cudaMemcpyPeerAsync cudaMemcpyToSymbol cudaMemcpyToSymbolAsync cudaMemcpyFromSymbol
cudaMemcpyFromSymbolAsync cudaMemcpy2DToArray cudaMemcpy2DFromArray cudaMemset cudaMemsetAsync cudaMemset2D
cudaMemset2DAsync cudaMemset3D cudaMemset3DAsync cudaMalloc cudaMallocAsync cudaMallocHost cudaMallocManaged
cudaMallocPitch cudaMallocArray cudaMallocFromPoolAsync cudaFree cudaFreeAsync cudaFreeHost cudaFreeArray
cudaHostAlloc cudaHostRegister cudaHostUnregister cudaHostGetDevicePointer cudaMemGetInfo cudaMemPrefetchAsync
cudaMemAdvise cudaMemPoolTrimTo cudaMemPoolSetAttribute cudaMemPoolGetAttribute cudaDeviceSynchronize
cudaDeviceReset cudaDeviceGetAttribute cudaDeviceSetLimit cudaDeviceGetLimit cudaDeviceGetStreamPriorityRange
cudaDeviceCanAccessPeer cudaDeviceEnablePeerAccess cudaDeviceDisablePeerAccess cudaDeviceGetPCIBusId
cudaDeviceGetByPCIBusId cudaDeviceSetCacheConfig cudaDeviceGetCacheConfig cudaDeviceSetSharedMemConfig
cudaDeviceGetDefaultMemPool cudaDeviceGetMemPool cudaGetDevice cudaSetDevice cudaGetDeviceCount
cudaGetDeviceProperties cudaGetDeviceProperties_v2 cudaGetLastError cudaPeekAtLastError cudaGetErrorString
cudaGetErrorName cudaDriverGetVersion cudaRuntimeGetVersion cudaGetDeviceFlags cudaSetDeviceFlags
cudaChooseDevice cudaStreamCreate cudaStreamCreateWithFlags cudaStreamCreateWithPriority cudaStreamDestroy
cudaStreamSynchronize cudaStreamWaitEvent cudaStreamQuery cudaStreamGetPriority cudaStreamGetFlags
cudaStreamIsCapturing cudaStreamGetCaptureInfo cudaStreamGetCaptureInfo_v2 cudaStreamBeginCapture
cudaStreamEndCapture cudaStreamAddCallback cudaStreamAttachMemAsync cudaEventCreate cudaEventCreateWithFlags
cudaEventDestroy cudaEventRecord cudaEventRecordWithFlags cudaEventSynchronize cudaEventQuery
cudaEventElapsedTime cudaFuncGetAttributes cudaFuncSetAttribute cudaFuncSetCacheConfig
cudaFuncSetSharedMemConfig cudaOccupancyMaxActiveBlocksPerMultiprocessor
cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags cudaOccupancyMaxPotentialBlockSize
cudaOccupancyAvailableDynamicSMemPerBlock cudaGraphLaunch cudaGraphInstantiate cudaGraphInstantiateWithFlags
cudaGraphDestroy cudaGraphExecDestroy cudaGraphCreate cudaGraphUpload cudaGraphExecUpdate
cudaThreadExchangeStreamCaptureMode cudaPointerGetAttributes cudaIpcGetMemHandle cudaIpcOpenMemHandle
cudaIpcCloseMemHandle cudaIpcGetEventHandle cudaIpcOpenEventHandle cudaProfilerStart cudaProfilerStop
cudaGetFuncBySymbol cudaGetDriverEntryPoint cudaGetSymbolAddress cudaGetSymbolSize cudaCreateTextureObject
cudaDestroyTextureObject cudaCreateSurfaceObject cudaDestroySurfaceObject cudaGetChannelDesc
cudaGetExportTable cudaUserObjectCreate cudaGraphRetainUserObject cudaSync
cuLaunchKernel cuLaunchKernelEx cuLaunchCooperativeKernel cuMemcpy cuMemcpyAsync cuMemcpyHtoD cuMemcpyHtoDAsync
cuMemcpyDtoH cuMemcpyDtoHAsync cuMemcpyDtoD cuMemcpyDtoDAsync cuMemcpy2D cuMemcpy2DAsync cuMemcpy3D
cuMemcpy3DAsync cuMemcpyPeer cuMemcpyPeerAsync cuMemsetD8 cuMemsetD8Async cuMemsetD16 cuMemsetD16Async
cuMemsetD32 cuMemsetD32Async cuMemAlloc cuMemAllocAsync cuMemAllocHost cuMemAllocManaged cuMemAllocPitch
cuMemFree cuMemFreeAsync cuMemFreeHost cuMemHostAlloc cuMemHostRegister cuMemHostUnregister cuMemGetInfo
cuMemPrefetchAsync cuMemAdvise cuMemCreate cuMemRelease cuMemMap cuMemUnmap cuMemSetAccess
cuMemAddressReserve cuMemAddressFree cuMemGetAllocationGranularity cuCtxSynchronize cuCtxCreate cuCtxDestroy
cuCtxGetCurrent cuCtxSetCurrent cuCtxPushCurrent cuCtxPopCurrent cuCtxGetDevice cuDevicePrimaryCtxRetain
cuDevicePrimaryCtxRelease cuDeviceGet cuDeviceGetCount cuDeviceGetName cuDeviceGetAttribute
cuDeviceTotalMem cuInit cuDriverGetVersion cuStreamCreate cuStreamCreateWithPriority cuStreamDestroy
cuStreamSynchronize cuStreamWaitEvent cuStreamQuery cuStreamGetPriority cuStreamIsCapturing
cuStreamGetCaptureInfo cuStreamBeginCapture cuStreamEndCapture cuEventCreate cuEventDestroy cuEventRecord
cuEventRecordWithFlags cuEventSynchronize cuEventQuery cuEventElapsedTime cuModuleLoad cuModuleLoadData
cuModuleLoadDataEx cuModuleLoadFatBinary cuModuleUnload cuModuleGetFunction cuModuleGetGlobal
cuLibraryLoadData cuLibraryGetKernel cuLibraryUnload cuKernelGetFunction cuFuncGetAttribute
cuFuncSetAttribute cuFuncSetCacheConfig cuGraphLaunch cuGraphInstantiate cuGraphInstantiateWithFlags
cuGraphDestroy cuGraphExecDestroy cuGraphUpload cuPointerGetAttribute cuPointerGetAttributes
cuOccupancyMaxActiveBlocksPerMultiprocessor cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags
cuOccupancyMaxPotentialBlockSize cuGetProcAddress cuGetExportTable cuProfilerStart cuProfilerStop
cuLinkCreate cuLinkAddData cuLinkComplete cuLinkDestroy cuIpcGetMemHandle cuIpcOpenMemHandle
cuIpcCloseMemHandle
"""

_HIP = """
hipLaunchKernel hipExtLaunchKernel hipModuleLaunchKernel hipExtModuleLaunchKernel hipHccModuleLaunchKernel
hipLaunchCooperativeKernel hipLaunchHostFunc hipMemcpy hipMemcpyAsync hipMemcpyWithStream hipMemcpyHtoD
hipMemcpyHtoDAsync hipMemcpyDtoH hipMemcpyDtoHAsync hipMemcpyDtoD hipMemcpyDtoDAsync hipMemcpy2D
hipMemcpy2DAsync hipMemcpy3D hipMemcpy3DAsync hipMemcpyPeer hipMemcpyPeerAsync hipMemcpyToSymbol
hipMemcpyToSymbolAsync hipMemcpyFromSymbol hipMemcpyFromSymbolAsync hipMemset hipMemsetAsync hipMemsetD8
hipMemsetD8Async hipMemsetD16 hipMemsetD16Async hipMemsetD32 hipMemsetD32Async hipMemset2D hipMemset2DAsync
hipMalloc hipMallocAsync hipMallocManaged hipMallocPitch hipHostMalloc hipExtMallocWithFlags hipFree
hipFreeAsync hipHostFree hipHostRegister hipHostUnregister hipHostGetDevicePointer hipMemGetInfo
hipMemPrefetchAsync hipMemAdvise hipDeviceSynchronize hipDeviceReset hipDeviceGetAttribute
hipDeviceGetStreamPriorityRange hipDeviceCanAccessPeer hipDeviceEnablePeerAccess hipDeviceDisablePeerAccess
hipDeviceGetPCIBusId hipGetDevice hipSetDevice hipGetDeviceCount hipGetDeviceProperties
hipGetDevicePropertiesR0600 hipGetDevicePropertiesR0000 hipGetLastError hipPeekAtLastError hipGetErrorString
hipGetErrorName hipDriverGetVersion hipRuntimeGetVersion hipStreamCreate hipStreamCreateWithFlags
hipStreamCreateWithPriority hipStreamDestroy hipStreamSynchronize hipStreamWaitEvent hipStreamQuery
hipStreamGetPriority hipStreamGetFlags hipStreamIsCapturing hipStreamGetCaptureInfo
hipStreamGetCaptureInfo_v2 hipStreamBeginCapture hipStreamEndCapture hipStreamAddCallback hipEventCreate
hipEventCreateWithFlags hipEventDestroy hipEventRecord hipEventSynchronize hipEventQuery hipEventElapsedTime
hipFuncGetAttributes hipFuncSetAttribute hipFuncSetCacheConfig hipOccupancyMaxActiveBlocksPerMultiprocessor
hipOccupancyMaxActiveBlocksPerMultiprocessorWithFlags hipOccupancyMaxPotentialBlockSize hipGraphLaunch
hipGraphInstantiate hipGraphDestroy hipGraphExecDestroy hipModuleLoad hipModuleLoadData hipModuleUnload
hipModuleGetFunction hipModuleGetGlobal hipPointerGetAttributes hipPointerGetAttribute hipIpcGetMemHandle
hipIpcOpenMemHandle hipIpcCloseMemHandle hipProfilerStart hipProfilerStop hipCtxSynchronize
hipDeviceGetName hipGetSymbolAddress hipGetSymbolSize hipExtStreamCreateWithCUMask
"""

#: Exact CUDA runtime / driver and HIP API names (a ``_v2`` / ``_ptsz`` / ``_ptds`` suffix is allowed).
RUNTIME_CALLS: frozenset[str] = frozenset((_CUDA_RUNTIME + _HIP).split())
_RUNTIME_SUFFIX = re.compile(r"(.+?)(?:_v\d|_ptsz|_ptds|_spt)+")

#: Kineto activity categories and trace-level structural values.
KINETO_CATEGORIES: frozenset[str] = frozenset(
    {
        "cpu_op",
        "user_annotation",
        "gpu_user_annotation",
        "cuda_runtime",
        "cuda_driver",
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "python_function",
        "ac2g",
        "fwdbwd",
        "Trace",
        "cuda_sync",
        "cpu_instant_event",
        "overhead",
        "cuda_profiler_range",
        "privateuse1_runtime",
        "privateuse1_driver",
        "mtia_runtime",
        "mtia_ccp_events",
        "xpu_runtime",
        "hip_runtime",
        "hip_driver",
        "gpu_op",
        "Runtime",
        "Driver",
        "Kernel",
        "Memcpy",
        "Memset",
        "Overhead",
        "Python",
        "Spans",
        "Traces",
        "PyTorch Profiler",
        "Trace PyTorch Profiler",
        "Iteration Start: PyTorch Profiler",
        "Record Window End",
        "<forward op>",
        "<backward op>",
        "forward",
        "backward",
        "detach",
        "detach_",
        "record_param_comms",
        "CPU",
        "GPU",
        "cuda",
        "cpu",
        "gloo",
        "nccl",
        "rccl",
        "mpi",
        "ucc",
        "default_pg",
        "allreduce",
        "allgather",
        "broadcast",
        "reduce_scatter",
        "reducescatter",
        "alltoall",
        "alltoall_base",
        "all_to_all",
        "allgather_into_tensor_coalesced",
        "send",
        "recv",
        "barrier",
        "wait",
        "gather",
        "scatter",
        "reduce",
        "coalesced",
        "Float",
        "Double",
        "Half",
        "BFloat16",
        "Long",
        "Int",
        "Short",
        "Byte",
        "Char",
        "Bool",
        "ComplexFloat",
        "ComplexDouble",
        "Scalar",
        "TensorList",
        "ScalarList",
        "GenericList",
        "Tensor",
        "Device",
        "Layout",
        "MemoryFormat",
        "ScalarType",
        "unsigned char",
        "signed char",
        "long int",
        "double",
        "c10::Half",
        "c10::BFloat16",
        "c10::complex<float>",
        "c10::complex<double>",
        "Dispatch Kernel",
        "Host",
        "Pinned",
        "Pageable",
        "Managed",
        "Array",
        "Unknown",
        "DistributedDataParallel.forward",
        "torch.distributed.ddp.reducer::copy_bucket_to_grad",
        "torch::distributed::reducer::mul_out",
        "_grad_sum_to_size",
        "Optimizer.step",
        "Optimizer.zero_grad",
        "cudaGraphLaunch",
        "Lazy Tensor Sync",
        "Activity Buffer Request",
        "CUPTI",
        "cupti",
        "roctracer",
        "long",
        "undefined",
        "username",
        "None",
        "",
    }
)

#: Kineto trace metadata keys, event keys and ``args`` keys.
KINETO_KEYS: frozenset[str] = frozenset(
    {
        "schemaVersion",
        "deviceProperties",
        "distributedInfo",
        "record_shapes",
        "with_stack",
        "profile_memory",
        "with_flops",
        "with_modules",
        "traceEvents",
        "traceName",
        "displayTimeUnit",
        "baseTimeNanoseconds",
        "INFO",
        "WARNING",
        "ERROR",
        "backend",
        "rank",
        "world_size",
        "pg_count",
        "pg_config",
        "pg_name",
        "pg_desc",
        "backend_config",
        "pg_size",
        "ranks",
        "nccl_version",
        "cuda_version",
        "cudnn_version",
        "trace_id",
        "totalGlobalMem",
        "computeMajor",
        "computeMinor",
        "maxThreadsPerBlock",
        "maxThreadsPerMultiprocessor",
        "regsPerBlock",
        "warpSize",
        "sharedMemPerBlock",
        "numSms",
        "regsPerMultiprocessor",
        "sharedMemPerBlockOptin",
        "sharedMemPerMultiprocessor",
        "maxSharedMemoryPerMultiProcessor",
        "ph",
        "cat",
        "pid",
        "tid",
        "ts",
        "dur",
        "args",
        "id",
        "id2",
        "s",
        "bp",
        "cname",
        "tts",
        "tdur",
        "sf",
        "stack",
        "scope",
        "bind_id",
        "flow_in",
        "flow_out",
        "stackFrames",
        "samples",
        "systemTraceEvents",
        "otherData",
        "metadata",
        "External id",
        "Ev Idx",
        "correlation",
        "Record function id",
        "cbid",
        "stream",
        "device",
        "context",
        "shared memory",
        "grid",
        "block",
        "queued",
        "registers per thread",
        "blocks per SM",
        "warps per SM",
        "est. achieved occupancy %",
        "Fwd thread id",
        "Sequence number",
        "Input Dims",
        "Input type",
        "Input Strides",
        "Concrete Inputs",
        "Input Names",
        "Output Dims",
        "Output type",
        "Output Strides",
        "bytes",
        "memory bandwidth (GB/s)",
        "sort_index",
        "labels",
        "Out msg nelems",
        "In msg nelems",
        "In split size",
        "Out split size",
        "Process Group Ranks",
        "Process Group Name",
        "Process Group Description",
        "Group size",
        "dtype",
        "Collective name",
        "Global rank start",
        "Global rank stride",
        "cid",
        "kind",
        "kernel",
        "Op count",
        "src",
        "dst",
        "size",
        "Python id",
        "Python parent id",
        "Python thread",
        "Python module id",
        "Trace name",
        "Trace iteration",
        "Addr",
        "Bytes",
        "Total Reserved",
        "Total Allocated",
        "Device Type",
        "Device Id",
        "wait_on_stream",
        "wait_on_cuda_event_record_corr_id",
        "wait_on_cuda_event_id",
        "event",
        "flops",
        "Flops",
        "Module Hierarchy",
        "Call stack",
        "seq_num",
        "pg_id",
        "Async",
        "Collective Name",
        "priority",
        "Is Async",
        "Blocks per SM",
        "Warps per SM",
        "Grid",
        "Block",
        "Registers per thread",
        "Shared memory",
        "Memcpy HtoD",
        "Memcpy DtoH",
        "Memcpy DtoD",
        "Memcpy PtoP",
        "Memset",
    }
)

_MEM_KIND = r"(?:HtoD|DtoH|DtoD|HtoH|PtoP|AtoH|HtoA|AtoD|DtoA|AtoA)"
_MEM_PLACE = r"(?:Pageable|Pinned|Device|Host|Managed|Array|Unknown|Peer)"
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_KNOWN_OPTIMIZERS = (
    "SGD|Adam|AdamW|Adagrad|Adadelta|Adamax|ASGD|LBFGS|NAdam|RAdam|RMSprop|Rprop|SparseAdam|"
    "Adafactor|FusedAdam|FusedLAMB|FusedSGD|LAMB|LARS|ZeroRedundancyOptimizer"
)
_NCCL_ARGS = (
    r"\((?:ncclDevComm\*, unsigned long, ncclWork\*|ncclDevComm\*, ncclWorkElem\*|"
    r"ncclDevKernelArgsStorage<\d+ul>|ncclDevComm\*, unsigned long, ncclWork\*, int)\)"
)

#: Anchored patterns (each must match the whole string).
GPU_PATTERNS: tuple[str, ...] = (
    r"ProfilerStep#\d+",
    r"PyTorch Profiler \(\d+\)",
    rf"Memcpy {_MEM_KIND}(?: \({_MEM_PLACE} -> {_MEM_PLACE}\))?",
    rf"Memset(?: \({_MEM_PLACE}\))?",
    _MEM_KIND,
    r"aten::[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)?",
    r"prim::[A-Za-z_][A-Za-z0-9_]*",
    r"c10d::[a-z_][a-z0-9_]*",
    r"(?:nccl|rccl|gloo|mpi|ucc):[a-z_][a-z0-9_]*",
    r"[A-Z][A-Za-z0-9]*Backward\d+",  # generated autograd nodes end with a digit
    r"torch::autograd::(?:AccumulateGrad|GraphRoot|CopyBackwards|CopySlices|Error|NotImplemented)",
    rf"Optimizer\.(?:step|zero_grad)#(?:{_KNOWN_OPTIMIZERS})\.(?:step|zero_grad)",
    rf"(?:nccl|rccl)(?:Dev)?Kernel_[A-Za-z0-9]+(?:_[A-Za-z0-9]+){{0,6}}(?:{_NCCL_ARGS})?",
    r"nccl(?:AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|AllToAll|Send|Recv)"
    r"(?:Ring|Tree|CollNet|NVLS|LL128|LL|Simple)*Kernel(?:_[a-z0-9]+){0,3}",  # NCCL < 2.12 kernel names
    r"(?:thread \d+|stream \d+) ?",  # Kineto thread / stream labels
    # TensorFlow / JAX profiler process and stream labels
    r"/host:CPU|/device:(?:GPU|CPU|TPU|XLA_GPU|XLA_CPU):\d+(?: Compute| stream \d+)?",
    r"Stream #\d+\((?:Compute|MemcpyH2D|MemcpyD2H|MemcpyD2D|MemcpyP2P|NCCL|Memset)\)",
    r"tf_executor|TraceMe|TraceContext|tf_data_iterator_get_next",
    r"(?:GPU|CPU|XPU|MTIA|HPU) ?\d*",
    r"(?:cpu|cuda|gloo|nccl|mpi|ucc)(?::(?:gloo|nccl|mpi|ucc))?(?:,(?:cpu|cuda):(?:gloo|nccl|mpi|ucc))*",
    r"0x[0-9a-fA-F]{1,16}",
    r"(?i:cuda|cpu|ipu|gpu|xla|mps|hip|xpu|meta|mtia)(?::\d+)?",  # torch device strings; pointers and addresses above
    r"\[[\d\s,.\[\]eE+-]*\]|\d+\.",  # Kineto's number lists and "1." scalars
    # cuBLAS / cuDNN generated kernel names: every underscore part from the kernel-name vocabulary
    r"(?:cudnn_(?:infer|train)_)?(?:ampere|volta|turing|maxwell|hopper|sm\d{2,3})_(?:xmma_|s|h|d|c|z|bf16|fp16|tf32|i8|)?"
    r"(?:gemm|sgemm|hgemm|dgemm|cgemm|zgemm|fprop|dgrad|wgrad|scudnn|hcudnn|fp16_s1688gemm|s1688gemm|"
    r"h1688gemm|s16816gemm|h16816gemm|bf16_s16816gemm)(?:_(?:"
    + r"|".join(
        (
            r"\d+x\d+(?:x\d+)?",
            r"[nt]{2}",
            r"v\d",
            r"relu",
            r"interior",
            r"small",
            r"medium",
            r"large",
            r"xregs",
            r"sliced\d+x\d+",
            r"ldg\d+",
            r"stages?_?\d+x\d+",
            r"stage\d+",
            r"warpsize\d+x\d+x\d+",
            r"tilesize\d+x\d+x\d+",
            r"tensor\d+x\d+x\d+",
            r"g\d+",
            r"align[ac]?\d+",
            r"implicit",
            r"gemm",
            r"indexed",
            r"precomp",
            r"tf32f32",
            r"f32f32",
            r"f16f16",
            r"bf16bf16",
            r"f32",
            r"f16",
            r"bf16",
            r"nhwckrsc",
            r"nchwkcrs",
            r"nhwc",
            r"nchw",
            r"execute",
            r"kernel",
            r"cudnn",
            r"infer",
            r"train",
            r"split",
            r"k",
            r"t1r1s1",
            r"nn",
            r"nt",
            r"tn",
            r"tt",
            r"splitK",
            r"relu",
            r"bias",
            r"ldg4",
            r"mods",
            r"batched",
            r"nstages\d+",
            r"xmma",
            r"fprop",
            r"dgrad",
            r"wgrad",
            r"scudnn",
            r"sgemm",
            r"s1688gemm",
            r"s16816gemm",
            r"h1688gemm",
            r"\d+",
        )
    )
    + r"))*",
    # CUTLASS generated kernel names
    r"cutlass_(?:\d+_)?(?:simt|tensorop|wmma_tensorop)_[a-z0-9]+(?:gemm|conv|fprop|dgrad|wgrad)"
    r"(?:_(?:\d+x\d+(?:x\d+)?|\d+x\d+_\d+x\d+|[nt]{2}|align\d+|optimized|analytic|tf32|f16|bf16|nhwc|"
    r"unity_stride|stride\d+|\d+))*",
)

#: C++ namespaces (and kernel-name heads) whose names are public inside kernel signatures.
CPP_NAMESPACES: frozenset[str] = frozenset(
    {
        "at",
        "c10",
        "std",
        "torch",
        "aten",
        "caffe2",
        "at_cuda_detail",
        "cub",
        "thrust",
        "cuda",
        "cudnn",
        "cublas",
        "cublasLt",
        "cutlass",
        "cutlass_cudnn_infer",
        "cutlass_cudnn_train",
        "cask_cudnn",
        "cask_cudnn_infer",
        "cask_cudnn_train",
        "cask",
        "xmma",
        "xmma_cudnn",
        "xmma_cudnn_infer",
        "xmma_cudnn_train",
        "internal",
        "epilogue",
        "nvjet",
        "flash",
        "pytorch_flash",
        "fmha",
        "apex",
        "transformer_engine",
        "triton",
        "rocprim",
        "hipcub",
        "miopen",
        "rocblas",
        "hipblaslt",
        "composable_kernel",
        "ck",
        "fbgemm",
        "fbgemm_gpu",
        "nccl",
        "rccl",
        "ncclDevComm",
        "ncclWork",
        "cooperative_groups",
        "cuda_cub",
        "detail",
        "native",
        "_GLOBAL__N_1",
        "autograd",
    }
)

#: Identifiers that may appear unqualified in a public kernel signature.
CPP_WORDS: frozenset[str] = frozenset(
    [
        "void",
        "int",
        "long",
        "short",
        "char",
        "float",
        "double",
        "bool",
        "unsigned",
        "signed",
        "const",
        "volatile",
        "auto",
        "decltype",
        "nullptr",
        "true",
        "false",
        "operator",
        "lambda",
        "anonymous",
        "namespace",
        "struct",
        "class",
        "enum",
        "typename",
        "template",
        "type",
        "value",
        "half",
        "half2",
        "nv_bfloat16",
        "nv_half",
        "__half",
        "__nv_bfloat16",
        "bfloat16",
        "int8_t",
        "int16_t",
        "int32_t",
        "int64_t",
        "uint8_t",
        "uint16_t",
        "uint32_t",
        "uint64_t",
        "size_t",
        "ptrdiff_t",
        "float2",
        "float4",
        "int2",
        "int4",
        "char4",
        "uchar4",
        "double2",
        "long2",
        "longlong2",
        "ulong2",
        "uint2",
        "uint4",
        "Kernel",
        "Params",
        "gemvNSP_kernel",
        "gemv2N_kernel",
        "gemv2T_kernel_val",
        "gemvx",
        "gemmk1_kernel",
        "gemmSN_TN_kernel",
        "gemmSN_NN_kernel",
        "gemmSN_NT_kernel",
        "scal_kernel",
        "splitKreduce_kernel",
        "sgemm_largek_lds64",
        "dot_kernel",
        "reduce_1Block_kernel",
        "axpy_kernel_val",
        "asum_kernel",
        "nrm2_kernel",
        "gemv2N_kernel_val",
        "gemv2T_kernel",
        "gemm_kernel",
        "kernel",
        "gemv_kernel",
        "elementwise_kernel",
        "vectorized_elementwise_kernel",
        "reduce_kernel",
        "unrolled_elementwise_kernel",
        "softmax_warp_forward",
        "softmax_warp_backward",
        "cunn_SoftMaxForward",
        "cunn_SoftMaxBackward",
        "indexSelectLargeIndex",
        "indexSelectSmallIndex",
        "distribution_elementwise_grid_stride_kernel",
        "TrivialOffsetCalculator",
        "OffsetCalculator",
        "IntDivider",
        "LoadWithoutCast",
        "StoreWithoutCast",
        "LoadWithCast",
        "StoreWithCast",
        "elementwise_kernel_with_index",
        "function_traits",
        "biasType",
    ]
)

_CPP_CHARS = re.compile(r"[\w:<>()\[\],*& #{}~.+\-'\"$!]+")
_QUALIFIED = re.compile(r"(?<![\w])((?:(?:[A-Za-z_]\w*|\(anonymous namespace\))::)*)([A-Za-z_]\w*)")
_DOTTED_QUAD = re.compile(r"\d+\.\d+\.\d+\.\d+")
_CUDA_TYPE = re.compile(r"(?:cublas|cudnn|cublasLt|cusparse|cufft|curand|cuda)[A-Z]\w*|nccl[A-Z]\w*")


def runtime_call(value: str) -> bool:
    """An exact CUDA/HIP runtime or driver call name (optionally with a ``_v2`` / ``_ptsz`` suffix)."""
    if value in RUNTIME_CALLS:
        return True
    m = _RUNTIME_SUFFIX.fullmatch(value)
    return m is not None and m.group(1) in RUNTIME_CALLS


def cpp_signature_public(value: str, name_public, namespaces=lambda ns: False) -> bool:
    """True when ``value`` looks like a C++ symbol and every identifier in it is public.

    An identifier qualified by ``ns::`` is public when its first namespace is in
    :data:`CPP_NAMESPACES`; an unqualified one when it is a C++ word (:data:`CPP_WORDS`), a
    CUDA-library type (``cudnnTensorStruct``), or public by ``name_public`` (the rest of the
    vocabulary). Free text (no ``::``, ``<`` or ``(``) is never a signature.
    """
    if len(value) > 20_000 or not ("::" in value or "<" in value or "(" in value):
        return False
    if _CPP_CHARS.fullmatch(value) is None or "  " in value or _DOTTED_QUAD.search(value):
        return False
    for m in _QUALIFIED.finditer(value):
        parts = [p for p in m.group(1).split("::") if p and p != "(anonymous namespace)"]
        ident = m.group(2)
        if parts:
            head = parts[0]
            if head in CPP_NAMESPACES or namespaces(head) or name_public(head) or _CUDA_TYPE.fullmatch(head):
                continue
            return False
        if value[max(0, m.start(2) - 2) : m.start(2)] == "::":
            continue  # a member of a type whose own name was checked (``Policy<...>::Policy800``)
        if ident in CPP_WORDS or _CUDA_TYPE.fullmatch(ident) or name_public(ident):
            continue
        if re.fullmatch(r"u?l{0,2}|f|e\d*|x[0-9a-fA-F]+", ident):  # literal suffixes: 1ul, 1.0f
            continue
        return False
    return True
