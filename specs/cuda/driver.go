// Package cuda declares the part of the CUDA driver API (cuda.h, libcuda.so.1) that toy uses to
// run its own kernels: initialization, devices and their compute capability, the primary
// context, modules loaded from PTX, function lookup, device memory, launches, synchronization and
// error strings. It is a spec: cmd/kernelgen reads it and emits generated/cudadrv, whose Load
// opens the driver with dlopen, so a cuda build needs no CUDA toolkit and a machine without a
// driver gets an error instead of a failure to start. See docs/SPECS.md.
//
// The driver renames several entry points with versioned suffixes (cuda.h #defines cuMemAlloc
// as cuMemAlloc_v2); the spec names the versioned symbol, which is what dlsym must find.
package cuda

import . "github.com/toyml/toy/specs/spec"

// Result is the status every driver call returns (CUresult). ResultSuccess is 0.
//
//kernelgen:enum enum cudaError_enum prefix=CUDA_
type Result int32

const (
	ResultSuccess                   Result = 0
	ResultErrorInvalidValue         Result = 1
	ResultErrorOutOfMemory          Result = 2
	ResultErrorNotInitialized       Result = 3
	ResultErrorDeinitialized        Result = 4
	ResultErrorNoDevice             Result = 100
	ResultErrorInvalidDevice        Result = 101
	ResultErrorInvalidImage         Result = 200
	ResultErrorInvalidContext       Result = 201
	ResultErrorNoBinaryForGPU       Result = 209 //kernelgen:c CUDA_ERROR_NO_BINARY_FOR_GPU
	ResultErrorInvalidPTX           Result = 218 //kernelgen:c CUDA_ERROR_INVALID_PTX
	ResultErrorInvalidHandle        Result = 400
	ResultErrorNotFound             Result = 500
	ResultErrorIllegalAddress       Result = 700
	ResultErrorLaunchOutOfResources Result = 701
	ResultErrorLaunchFailed         Result = 719
	ResultErrorNotSupported         Result = 801
	ResultErrorSystemDriverMismatch Result = 803
	ResultErrorUnknown              Result = 999
)

// DeviceAttribute names a device property cuDeviceGetAttribute reads (CUdevice_attribute).
//
//kernelgen:enum enum CUdevice_attribute_enum prefix=CU_DEVICE_ATTRIBUTE_
type DeviceAttribute int32

const (
	DeviceAttributeMaxThreadsPerBlock      DeviceAttribute = 1
	DeviceAttributeMaxSharedMemoryPerBlock DeviceAttribute = 8
	DeviceAttributeWarpSize                DeviceAttribute = 10
	DeviceAttributeClockRate               DeviceAttribute = 13
	DeviceAttributeMultiprocessorCount     DeviceAttribute = 16
	DeviceAttributeComputeCapabilityMajor  DeviceAttribute = 75
	DeviceAttributeComputeCapabilityMinor  DeviceAttribute = 76
)

// Context is a CUDA context (CUcontext): the device state a thread's calls act on. toy uses the
// device's primary context.
//
//kernelgen:handle CUcontext = struct CUctx_st
type Context struct{}

// Module is a loaded module (CUmodule): the functions of one PTX image, compiled for the device.
//
//kernelgen:handle CUmodule = struct CUmod_st
type Module struct{}

// Function is a kernel entry point of a module (CUfunction).
//
//kernelgen:handle CUfunction = struct CUfunc_st
type Function struct{}

// Stream is a queue of device work (CUstream); the zero Stream is the context's default stream.
//
//kernelgen:handle CUstream = struct CUstream_st
type Stream struct{}

// DriverFuncs are the driver API calls toy binds. A device is its ordinal (CUdevice, a C int);
// device memory is a CUdeviceptr (unsigned long long). Each binds cuNAME as NAME.
//
//kernelgen:functions prefix=cu
type DriverFuncs interface {
	// Init initializes the driver; flags must be 0. It must precede every other call.
	//kernelgen:c cuInit
	Init(flags uint32) Result
	// DriverGetVersion writes the driver's CUDA version (1000*major + 10*minor).
	//kernelgen:c cuDriverGetVersion
	DriverGetVersion(version *Int) Result
	// GetErrorString writes a description of an error code (static storage).
	//kernelgen:c cuGetErrorString
	GetErrorString(err Result, str *string) Result
	// GetErrorName writes the name of an error code, e.g. "CUDA_ERROR_INVALID_VALUE".
	//kernelgen:c cuGetErrorName
	GetErrorName(err Result, str *string) Result

	// DeviceGetCount writes the number of CUDA devices.
	//kernelgen:c cuDeviceGetCount
	DeviceGetCount(count *Int) Result
	// DeviceGet writes the device with the given ordinal.
	//kernelgen:c cuDeviceGet
	DeviceGet(device *Int, ordinal Int) Result
	// DeviceGetName writes the device's name, NUL-terminated, into name (at most length bytes).
	//kernelgen:c cuDeviceGetName
	DeviceGetName(name []Char, length Int, dev Int) Result
	// DeviceGetAttribute writes one property of the device.
	//kernelgen:c cuDeviceGetAttribute
	DeviceGetAttribute(value *Int, attrib DeviceAttribute, dev Int) Result
	// DeviceTotalMem writes the device's memory in bytes.
	//kernelgen:c cuDeviceTotalMem_v2
	DeviceTotalMem(bytes *Size, dev Int) Result

	// DevicePrimaryCtxRetain writes the device's primary context, retaining it.
	//kernelgen:c cuDevicePrimaryCtxRetain
	DevicePrimaryCtxRetain(ctx *Context, dev Int) Result
	// DevicePrimaryCtxRelease releases one retain of the device's primary context.
	//kernelgen:c cuDevicePrimaryCtxRelease_v2
	DevicePrimaryCtxRelease(dev Int) Result
	// CtxSetCurrent binds ctx to the calling OS thread.
	//kernelgen:c cuCtxSetCurrent
	CtxSetCurrent(ctx Context) Result
	// CtxSynchronize waits until all work of the current context is done, and reports the first
	// error of an earlier launch.
	//kernelgen:c cuCtxSynchronize
	CtxSynchronize() Result

	// ModuleLoadData loads a module from a NUL-terminated PTX text (JIT-compiled for the
	// device) or a cubin image.
	//kernelgen:c cuModuleLoadData
	ModuleLoadData(module *Module, image Const[Ptr]) Result
	// ModuleUnload unloads a module.
	//kernelgen:c cuModuleUnload
	ModuleUnload(module Module) Result
	// ModuleGetFunction writes the module's kernel with the given entry-point name.
	//kernelgen:c cuModuleGetFunction
	ModuleGetFunction(fn *Function, module Module, name string) Result

	// MemAlloc writes the address of size new bytes of device memory.
	//kernelgen:c cuMemAlloc_v2
	MemAlloc(dptr *ULLong, size Size) Result
	// MemFree frees device memory from MemAlloc.
	//kernelgen:c cuMemFree_v2
	MemFree(dptr ULLong) Result
	// MemcpyHtoD copies size bytes from host memory to device memory (synchronously).
	//kernelgen:c cuMemcpyHtoD_v2
	MemcpyHtoD(dst ULLong, src Const[Ptr], size Size) Result
	// MemcpyDtoH copies size bytes from device memory to host memory (synchronously).
	//kernelgen:c cuMemcpyDtoH_v2
	MemcpyDtoH(dst Ptr, src ULLong, size Size) Result

	// LaunchKernel queues fn on a grid of gridX×gridY×gridZ blocks of blockX×blockY×blockZ
	// threads with sharedMem bytes of dynamic shared memory. params holds one address per
	// kernel parameter, pointing at its value; extra must be nil.
	//kernelgen:c cuLaunchKernel
	LaunchKernel(fn Function, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedMem uint32, stream Stream, params, extra []Ptr) Result
	// StreamSynchronize waits until the stream's work is done.
	//kernelgen:c cuStreamSynchronize
	StreamSynchronize(stream Stream) Result
}
