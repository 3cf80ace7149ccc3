//! Adapters: which GPUs wgpu sees (Vulkan, Metal, DX12; never GL), the listing `histfit devices`
//! prints, and opening a device with the limits the kernel needs, its losses and errors caught
//! and turned into [`WgpuError`]s.

use crate::{Result, WgpuError};
use std::sync::{Arc, Mutex};

/// Which native API an adapter is reached through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Any of them (`wgpu`, `wgpu:N`).
    Any,
    Vulkan,
    Metal,
    Dx12,
}

impl Backend {
    fn backends(self) -> wgpu::Backends {
        match self {
            Backend::Any => wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12,
            Backend::Vulkan => wgpu::Backends::VULKAN,
            Backend::Metal => wgpu::Backends::METAL,
            Backend::Dx12 => wgpu::Backends::DX12,
        }
    }
}

/// One adapter as the devices document lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterInfo {
    /// Index among the adapters of the backend it was listed for: every backend for
    /// `histfit devices` and `wgpu:N`, one backend for `vulkan:N`, `metal:N`, `dx12:N`.
    pub index: usize,
    pub name: String,
    /// "vulkan", "metal" or "dx12".
    pub backend: String,
    /// "discrete", "integrated", "cpu" (a software rasteriser such as lavapipe), ….
    pub kind: String,
    pub driver: String,
    /// Whether shaders may use f64 (histfit's kernel does not need it).
    pub f64: bool,
    /// Largest storage buffer one binding may span, in bytes.
    pub max_storage_binding: u64,
}

/// Keeps Mesa's Vulkan device-select layer from looking for a desktop session where there is none.
///
/// That implicit layer orders GPUs by the display's and, to find it, connects to Wayland, whose
/// client library prints "error: XDG_RUNTIME_DIR is invalid or not set" on every enumeration
/// on a headless machine — a message that looks like histfit's own failure. Without a session
/// there is no display to order by, so the layer is switched off (`NODEVICE_SELECT=1`, its own
/// switch) unless the user chose a device through it (`MESA_VK_DEVICE_SELECT`) or set the switch.
/// Changes the environment: call it at start-up, before other threads exist.
pub fn skip_display_probe() {
    let session =
        std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|d| std::path::Path::new(&d).is_dir());
    let chosen = std::env::var_os("MESA_VK_DEVICE_SELECT").is_some()
        || std::env::var_os("NODEVICE_SELECT").is_some();
    if !session && !chosen {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}

fn instance(backend: Backend) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    desc.backends = backend.backends();
    wgpu::Instance::new(desc)
}

fn enumerate(backend: Backend) -> Vec<wgpu::Adapter> {
    pollster::block_on(instance(backend).enumerate_adapters(backend.backends()))
}

fn info_of(index: usize, a: &wgpu::Adapter) -> AdapterInfo {
    let i = a.get_info();
    AdapterInfo {
        index,
        name: i.name,
        backend: format!("{:?}", i.backend).to_ascii_lowercase(),
        kind: match i.device_type {
            wgpu::DeviceType::DiscreteGpu => "discrete",
            wgpu::DeviceType::IntegratedGpu => "integrated",
            wgpu::DeviceType::VirtualGpu => "virtual",
            wgpu::DeviceType::Cpu => "cpu",
            wgpu::DeviceType::Other => "other",
        }
        .into(),
        driver: format!("{} {}", i.driver, i.driver_info).trim().to_string(),
        f64: a.features().contains(wgpu::Features::SHADER_F64),
        max_storage_binding: a.limits().max_storage_buffer_binding_size,
    }
}

/// Every adapter wgpu finds (no GL adapters), in the order `wgpu:N` counts them.
pub fn adapters() -> Vec<AdapterInfo> {
    enumerate(Backend::Any)
        .iter()
        .enumerate()
        .map(|(k, a)| info_of(k, a))
        .collect()
}

/// Storage buffers the kernel binds.
const STORAGE_BUFFERS: u32 = 7;

/// An open device: the adapter's description, the device and its queue, and what its loss
/// callback recorded.
#[derive(Debug)]
pub struct Gpu {
    pub info: AdapterInfo,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub limits: wgpu::Limits,
    lost: Arc<Mutex<Option<String>>>,
}

impl Gpu {
    /// Opens adapter `index` of `backend` (`None`: the first discrete GPU, else the first one).
    pub fn open(backend: Backend, index: Option<usize>) -> Result<Gpu> {
        let all = enumerate(backend);
        if all.is_empty() {
            return Err(WgpuError::Unavailable(format!(
                "wgpu finds no {} adapter ({})",
                match backend {
                    Backend::Any => "Vulkan, Metal or DX12",
                    Backend::Vulkan => "Vulkan",
                    Backend::Metal => "Metal",
                    Backend::Dx12 => "DX12",
                },
                match backend {
                    Backend::Metal => "Metal exists on Apple systems only",
                    Backend::Dx12 => "DX12 exists on Windows only",
                    _ =>
                        "no Vulkan driver or loader installed? on Linux: libvulkan1 and a driver \
                          such as mesa-vulkan-drivers",
                }
            )));
        }
        let k = match index {
            Some(k) if k < all.len() => k,
            Some(k) => {
                return Err(WgpuError::Unavailable(format!(
                    "adapter {k} asked for, {} found (`histfit devices` lists them)",
                    all.len()
                )))
            }
            // The best kind first: a discrete GPU, then integrated, virtual, other, and a
            // software rasteriser (lavapipe) last.
            None => (0..all.len())
                .min_by_key(|&k| match all[k].get_info().device_type {
                    wgpu::DeviceType::DiscreteGpu => 0,
                    wgpu::DeviceType::IntegratedGpu => 1,
                    wgpu::DeviceType::VirtualGpu => 2,
                    wgpu::DeviceType::Other => 3,
                    wgpu::DeviceType::Cpu => 4,
                })
                .unwrap_or(0),
        };
        let adapter = &all[k];
        let info = info_of(k, adapter);
        let limits = adapter.limits();
        let need = [
            (
                limits.max_storage_buffers_per_shader_stage >= STORAGE_BUFFERS,
                format!(
                    "it allows {} storage buffers per shader stage, the kernel binds {STORAGE_BUFFERS}",
                    limits.max_storage_buffers_per_shader_stage
                ),
            ),
            (
                limits.max_compute_invocations_per_workgroup >= 64
                    && limits.max_compute_workgroup_size_x >= 64,
                "it runs fewer than 64 invocations per workgroup".to_string(),
            ),
        ];
        if let Some((_, rule)) = need.into_iter().find(|(ok, _)| !ok) {
            return Err(WgpuError::Limits {
                adapter: info.name.clone(),
                rule,
            });
        }
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("histfit"),
            required_features: wgpu::Features::empty(),
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| WgpuError::Device {
            adapter: info.name.clone(),
            what: format!("could not be opened: {e}"),
        })?;
        let lost = Arc::new(Mutex::new(None));
        let record = lost.clone();
        device.set_device_lost_callback(move |reason, msg| {
            *record.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(format!("device lost ({reason:?}): {msg}"));
        });
        // Errors are caught by error scopes around each submission; anything else is recorded.
        let record = lost.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut l = record.lock().unwrap_or_else(|p| p.into_inner());
            if l.is_none() {
                *l = Some(e.to_string());
            }
        }));
        Ok(Gpu {
            info,
            device,
            queue,
            limits,
            lost,
        })
    }

    /// A device error naming the adapter.
    pub fn error(&self, what: impl Into<String>) -> WgpuError {
        WgpuError::Device {
            adapter: self.info.name.clone(),
            what: what.into(),
        }
    }

    /// Runs `f` inside out-of-memory and validation error scopes, then checks that the device
    /// is not lost: a failure of the GPU becomes one error, never a wrong number.
    pub fn checked<T>(&self, what: &str, f: impl FnOnce() -> T) -> Result<T> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let valid = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let out = f();
        let v = pollster::block_on(valid.pop());
        let o = pollster::block_on(oom.pop());
        if let Some(e) = o {
            return Err(self.error(format!("{what}: out of device memory ({e})")));
        }
        if let Some(e) = v {
            return Err(self.error(format!("{what}: {e}")));
        }
        self.alive()?;
        Ok(out)
    }

    /// An error if the device was lost or reported an error outside a scope.
    pub fn alive(&self) -> Result<()> {
        match &*self.lost.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(m) => Err(self.error(m.clone())),
            None => Ok(()),
        }
    }
    /// Waits for the queue, then reads the first `bytes` of `staging` (a MAP_READ buffer the
    /// submitted work copied its results into) as f32.
    pub fn read_back(&self, staging: &wgpu::Buffer, bytes: u64) -> Result<Vec<f32>> {
        let slice = staging.slice(0..bytes);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: None,
            })
            .map_err(|e| self.error(format!("waiting for the kernel: {e}")))?;
        rx.recv()
            .map_err(|_| self.error("the read-back never completed"))?
            .map_err(|e| self.error(format!("reading results back: {e}")))?;
        self.alive()?;
        let out = {
            let view = slice
                .get_mapped_range()
                .map_err(|e| self.error(format!("reading results back: {e}")))?;
            let raw: &[u8] = &view;
            raw.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        };
        staging.unmap();
        Ok(out)
    }

    /// Runs `entry` of `source` once over `workgroups` workgroups with binding 0 = `input`, pipeline `constants` and
    /// binding 1 = `out_len` f32 of output, and returns the output (for small checks such as
    /// the double-float probe).
    pub fn run_once(
        &self,
        source: &str,
        entry: &str,
        constants: &[(&str, f64)],
        input: &[f32],
        out_len: usize,
        workgroups: usize,
    ) -> Result<Vec<f32>> {
        let bytes = (out_len * 4) as u64;
        let staging = self.checked(entry, || {
            let d = &self.device;
            let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(entry),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
            let pipeline = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants,
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            });
            let inp = storage_buffer(d, "input", (input.len() * 4) as u64);
            self.queue.write_buffer(&inp, 0, as_bytes(input));
            let out = storage_buffer(d, "output", bytes);
            let staging = staging_buffer(d, bytes);
            let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(entry),
                layout: &pipeline.get_bind_group_layout(0),
                entries: &[
                    wgpu::BindGroupEntry {
                        binding: 0,
                        resource: inp.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 1,
                        resource: out.as_entire_binding(),
                    },
                ],
            });
            let mut enc = d.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &group, &[]);
                pass.dispatch_workgroups(workgroups as u32, 1, 1);
            }
            enc.copy_buffer_to_buffer(&out, 0, &staging, 0, bytes);
            self.queue.submit([enc.finish()]);
            staging
        })?;
        self.read_back(&staging, bytes)
    }
}

/// A storage buffer the host writes and reads back from (at least 16 bytes, 4-byte aligned).
pub fn storage_buffer(device: &wgpu::Device, label: &str, size: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size.max(16).next_multiple_of(4),
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

/// A buffer results are copied into for reading on the host.
pub fn staging_buffer(device: &wgpu::Device, size: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("read back"),
        size: size.max(16).next_multiple_of(4),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// The bytes of a slice of 4-byte plain numbers (f32, i32, u32).
pub fn as_bytes<T: Plain>(v: &[T]) -> &[u8] {
    // SAFETY: `Plain` types have no padding and no invalid byte patterns.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

/// Numbers whose bytes may be uploaded as they are.
pub trait Plain: Copy {}
impl Plain for f32 {}
impl Plain for i32 {}
impl Plain for u32 {}
