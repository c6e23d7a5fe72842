// Package cuda runs toy's own CUDA kernels (kernels/cuda/, embedded as PTX per target in
// generated/kernels) through the CUDA driver API, which generated/cudadrv binds from
// specs/cuda and loads with dlopen. It owns a device's primary context, device memory, the
// modules of the compiled-in kernel target that suits the device, and launches.
//
// ggml's own CUDA backend (matrix products, attention, the model graphs) is separate: it is
// ggml.NewBackend in a cuda build. This package is what toy adds beside it: token sampling on
// the device and a fused AdamW step.
//
// Open fails with a clear error in a build without -tags cuda (no CUDA target is compiled
// in), on a machine without the driver, and on one without a device.
package cuda

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"unsafe"

	"github.com/toyml/toy/generated/cudadrv"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/kernelrt"
)

// ErrNoDevice is returned by Open when the driver loads but finds no device with the ordinal.
var ErrNoDevice = errors.New("cuda: no such CUDA device")

// Error is a failed driver call.
type Error struct {
	// Op is the call, e.g. "cuModuleLoadData (sampling)".
	Op string
	// Code is the driver's result.
	Code cudadrv.Result
	// Text is the driver's description of Code.
	Text string
}

func (e *Error) Error() string { return fmt.Sprintf("cuda: %s: %s (%s)", e.Op, e.Text, e.Code) }

// check turns a driver result into an error.
func check(r cudadrv.Result, op string) error {
	if r == cudadrv.ResultSuccess {
		return nil
	}
	var text string
	if cudadrv.GetErrorString(r, &text) != cudadrv.ResultSuccess || text == "" {
		text = "unknown error"
	}
	return &Error{Op: op, Code: r, Text: text}
}

// Device is one CUDA device with its primary context, and the compiled-in kernel target that
// runs on it. Its methods may be called from any goroutine; they serialize.
type Device struct {
	mu      sync.Mutex
	ordinal int
	ctx     cudadrv.Context
	name    string
	cap     kernelrt.Capability
	mem     int
	driver  int
	target  *kernels.Target
	modules map[kernels.ModuleID]cudadrv.Module
	funcs   map[moduleKernel]cudadrv.Function
	scratch *Buffer // 4 bytes for kernel results
	closed  bool
}

// Open loads the driver, opens device ordinal (0 is the first) and picks the compiled-in CUDA
// kernel target for it (an exact-capability target such as sm_90a on 9.0 first, else the
// newest compatible one; see kernelrt.Preflight).
func Open(ordinal int) (*Device, error) {
	var targets []*kernels.Target
	for _, t := range kernels.Compiled() {
		if t.Backend == kernels.BackendCUDA {
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		return nil, kernels.ErrNotCompiledWithCUDA
	}
	if err := cudadrv.Load(); err != nil {
		return nil, err
	}
	d := &Device{ordinal: ordinal, modules: map[kernels.ModuleID]cudadrv.Module{}, funcs: map[moduleKernel]cudadrv.Function{}}
	err := d.do(false, func() error {
		if err := check(cudadrv.Init(0), "cuInit"); err != nil {
			return err
		}
		cudadrv.DriverGetVersion(&d.driver)
		var n int
		if err := check(cudadrv.DeviceGetCount(&n), "cuDeviceGetCount"); err != nil {
			return err
		}
		if ordinal < 0 || ordinal >= n {
			return fmt.Errorf("%w: ordinal %d of %d", ErrNoDevice, ordinal, n)
		}
		var dev int
		if err := check(cudadrv.DeviceGet(&dev, ordinal), "cuDeviceGet"); err != nil {
			return err
		}
		d.ordinal = dev
		name := make([]byte, 256)
		if err := check(cudadrv.DeviceGetName(name, len(name), dev), "cuDeviceGetName"); err != nil {
			return err
		}
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		d.name = string(name)
		if err := check(cudadrv.DeviceGetAttribute(&d.cap.Major, cudadrv.DeviceAttributeComputeCapabilityMajor, dev), "cuDeviceGetAttribute"); err != nil {
			return err
		}
		if err := check(cudadrv.DeviceGetAttribute(&d.cap.Minor, cudadrv.DeviceAttributeComputeCapabilityMinor, dev), "cuDeviceGetAttribute"); err != nil {
			return err
		}
		if err := check(cudadrv.DeviceTotalMem(&d.mem, dev), "cuDeviceTotalMem"); err != nil {
			return err
		}
		return check(cudadrv.DevicePrimaryCtxRetain(&d.ctx, dev), "cuDevicePrimaryCtxRetain")
	})
	if err != nil {
		return nil, err
	}
	if d.target, err = pickTarget(targets, d.cap); err != nil {
		d.Close()
		return nil, err
	}
	if d.scratch, err = d.Alloc(8); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// pickTarget chooses among the compiled-in CUDA targets: one whose arch names the device's
// capability exactly, else the newest compatible one.
func pickTarget(targets []*kernels.Target, dev kernelrt.Capability) (*kernels.Target, error) {
	type cand struct {
		t     *kernels.Target
		c     kernelrt.Capability
		exact bool
	}
	var ok []cand
	var refusals []string
	for _, t := range targets {
		if err := kernelrt.Preflight(t, dev); err != nil {
			refusals = append(refusals, err.Error())
			continue
		}
		c, _, _ := kernelrt.ParseArch(t.Arch)
		ok = append(ok, cand{t, c, c == dev})
	}
	if len(ok) == 0 {
		return nil, fmt.Errorf("cuda: no compiled-in kernel target runs on compute capability %s: %v", dev, refusals)
	}
	sort.SliceStable(ok, func(i, j int) bool {
		if ok[i].exact != ok[j].exact {
			return ok[i].exact
		}
		return ok[i].c.Major > ok[j].c.Major || ok[i].c.Major == ok[j].c.Major && ok[i].c.Minor > ok[j].c.Minor
	})
	return ok[0].t, nil
}

// do runs f with the device's context current on a locked OS thread (CUDA contexts are per
// thread; goroutines move between threads). withCtx is false only while opening.
func (d *Device) do(withCtx bool, f func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("cuda: the device is closed")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if withCtx {
		if err := check(cudadrv.CtxSetCurrent(d.ctx), "cuCtxSetCurrent"); err != nil {
			return err
		}
	}
	return f()
}

// Name is the device's name, e.g. "NVIDIA H200".
func (d *Device) Name() string { return d.name }

// Capability is the device's compute capability.
func (d *Device) Capability() kernelrt.Capability { return d.cap }

// Memory is the device's memory in bytes.
func (d *Device) Memory() int { return d.mem }

// DriverVersion is the driver's CUDA version as 1000*major + 10*minor (13000 for 13.0).
func (d *Device) DriverVersion() int { return d.driver }

// Target is the compiled-in kernel target Open chose for the device.
func (d *Device) Target() *kernels.Target { return d.target }

// Close unloads the modules, frees the scratch memory and releases the primary context. Safe
// to call more than once.
func (d *Device) Close() error {
	if d == nil {
		return nil
	}
	if d.scratch != nil {
		d.scratch.Free()
		d.scratch = nil
	}
	return d.do(true, func() error {
		var errs []error
		for id, m := range d.modules {
			errs = append(errs, check(cudadrv.ModuleUnload(m), "cuModuleUnload ("+id.Name()+")"))
		}
		if !d.ctx.IsNil() {
			errs = append(errs, check(cudadrv.DevicePrimaryCtxRelease(d.ordinal), "cuDevicePrimaryCtxRelease"))
		}
		d.closed = true
		return errors.Join(errs...)
	})
}

// Synchronize waits for all queued work and reports the first error of an earlier launch.
func (d *Device) Synchronize() error {
	return d.do(true, func() error { return check(cudadrv.CtxSynchronize(), "cuCtxSynchronize") })
}

// Buffer is device memory.
type Buffer struct {
	d    *Device
	ptr  uint64
	size int
}

// Alloc allocates bytes of device memory.
func (d *Device) Alloc(bytes int) (*Buffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("cuda: Alloc of %d bytes", bytes)
	}
	b := &Buffer{d: d, size: bytes}
	err := d.do(true, func() error {
		return check(cudadrv.MemAlloc(&b.ptr, bytes), fmt.Sprintf("cuMemAlloc (%d bytes)", bytes))
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Size is the buffer's size in bytes.
func (b *Buffer) Size() int { return b.size }

// Free releases the buffer. Safe to call more than once.
func (b *Buffer) Free() error {
	if b == nil || b.ptr == 0 {
		return nil
	}
	err := b.d.do(true, func() error { return check(cudadrv.MemFree(b.ptr), "cuMemFree") })
	b.ptr = 0
	return err
}

// copyIn copies n bytes from host memory at p into the buffer.
func (b *Buffer) copyIn(p unsafe.Pointer, n int) error {
	if b.ptr == 0 {
		return errors.New("cuda: the buffer is freed")
	}
	if n > b.size {
		return fmt.Errorf("cuda: %d bytes into a buffer of %d", n, b.size)
	}
	if n == 0 {
		return nil
	}
	return b.d.do(true, func() error { return check(cudadrv.MemcpyHtoD(b.ptr, p, n), "cuMemcpyHtoD") })
}

// copyOut copies n bytes of the buffer into host memory at p.
func (b *Buffer) copyOut(p unsafe.Pointer, n int) error {
	if b.ptr == 0 {
		return errors.New("cuda: the buffer is freed")
	}
	if n > b.size {
		return fmt.Errorf("cuda: %d bytes out of a buffer of %d", n, b.size)
	}
	if n == 0 {
		return nil
	}
	return b.d.do(true, func() error { return check(cudadrv.MemcpyDtoH(p, b.ptr, n), "cuMemcpyDtoH") })
}

// Upload copies host values into the start of the buffer.
func Upload[T float32 | int32](b *Buffer, v []T) error {
	if len(v) == 0 {
		return nil
	}
	return b.copyIn(unsafe.Pointer(&v[0]), len(v)*int(unsafe.Sizeof(v[0])))
}

// Download copies the start of the buffer into v.
func Download[T float32 | int32](b *Buffer, v []T) error {
	if len(v) == 0 {
		return nil
	}
	return b.copyOut(unsafe.Pointer(&v[0]), len(v)*int(unsafe.Sizeof(v[0])))
}

// UploadNew allocates a buffer holding v.
func UploadNew[T float32 | int32](d *Device, v []T) (*Buffer, error) {
	b, err := d.Alloc(max(1, len(v)) * int(unsafe.Sizeof(*new(T))))
	if err != nil {
		return nil, err
	}
	if err := Upload(b, v); err != nil {
		b.Free()
		return nil, err
	}
	return b, nil
}

// moduleKernel is a loaded entry point: kernel k from module mod (its own module, or a model's
// namesake that replaces it).
type moduleKernel struct {
	mod kernels.ModuleID
	k   kernels.KernelID
}

// function returns kernel k of the device's target from its own module, loading the module
// (JIT-compiling the PTX) on first use.
func (d *Device) function(k kernels.KernelID) (cudadrv.Function, error) {
	return d.functionIn(k.Module(), k)
}

// functionIn returns kernel k from module mod of the device's target (a model's namesake
// module, as kernelrt.Lookup finds it), loading the module on first use.
func (d *Device) functionIn(mod kernels.ModuleID, k kernels.KernelID) (cudadrv.Function, error) {
	var fn cudadrv.Function
	key := moduleKernel{mod, k}
	err := d.do(true, func() error {
		if f, ok := d.funcs[key]; ok {
			fn = f
			return nil
		}
		f, err := d.entry(mod, k.Name())
		if err != nil {
			return err
		}
		d.funcs[key] = f
		fn = f
		return nil
	})
	return fn, err
}

// entry looks up the entry point name in module id of the device's target, loading the module
// on first use; the caller holds the device (d.do).
func (d *Device) entry(id kernels.ModuleID, name string) (cudadrv.Function, error) {
	var fn cudadrv.Function
	m, ok := d.modules[id]
	if !ok {
		mod := d.target.Module(id)
		if mod == nil || mod.Blob == "" {
			return fn, fmt.Errorf("cuda: target %s has no module %s", d.target.Name, id)
		}
		img := append([]byte(mod.Blob), 0)
		if err := check(cudadrv.ModuleLoadData(&m, unsafe.Pointer(&img[0])), "cuModuleLoadData ("+d.target.Name+" "+mod.Name+")"); err != nil {
			return fn, err
		}
		d.modules[id] = m
	}
	err := check(cudadrv.ModuleGetFunction(&fn, m, name), "cuModuleGetFunction ("+id.Name()+"."+name+")")
	return fn, err
}

// launch runs fn, kernel k, on grid×1×1 blocks of block×1×1 threads with the given kernel arguments:
// *Buffer (a device pointer), int32, int64 or float32, in the kernel's parameter order.
func (d *Device) launch(fn cudadrv.Function, k kernels.KernelID, grid, block int, args ...any) error {
	what := k.Name()
	vals := make([]uint64, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case *Buffer:
			if v == nil || v.ptr == 0 {
				return fmt.Errorf("cuda: %s: argument %d is a freed or nil buffer", what, i)
			}
			vals[i] = v.ptr
		case int32:
			vals[i] = uint64(uint32(v))
		case int64:
			vals[i] = uint64(v)
		case float32:
			vals[i] = uint64(math.Float32bits(v))
		default:
			return fmt.Errorf("cuda: %s: argument %d has type %T", what, i, a)
		}
	}
	// Each parameter address points into vals, which is pinned so that the driver may read it.
	params := make([]unsafe.Pointer, len(vals))
	var pin runtime.Pinner
	defer pin.Unpin()
	if len(vals) > 0 {
		pin.Pin(&vals[0])
	}
	for i := range vals {
		params[i] = unsafe.Pointer(&vals[i])
	}
	return d.do(true, func() error {
		return check(cudadrv.LaunchKernel(fn, uint32(grid), 1, 1, uint32(block), 1, 1, 0, cudadrv.Stream{}, params, nil), "cuLaunchKernel ("+what+")")
	})
}
