#![allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]

use candle_core::{Context, Device, Result, Storage, Tensor, WithDType};

use half::bf16;
use half::f16;
use rayon::prelude::*;
#[cfg(target_os = "macos")]
use rayon::ThreadPool;

#[cfg(target_os = "macos")]
use std::sync::LazyLock;
use std::{f32, iter::Sum};


use crate::attention::SdpaParams;

#[cfg(target_os = "macos")]
/// Elevate the thread QoS so macOS prefers running it on Performance (P) cores.
unsafe fn set_thread_affinity() {
    // USER_INTERACTIVE has the highest scheduling priority that user code
    // can request and is most likely to be scheduled on P‑cores.
    use libc::{pthread_set_qos_class_self_np, qos_class_t::QOS_CLASS_USER_INTERACTIVE};
    // The second argument is a relative priority within the QoS class (0 = default).
    pthread_set_qos_class_self_np(QOS_CLASS_USER_INTERACTIVE, 0);
}

/// Rayon pool used by the flash‑attention CPU kernels, with a per‑thread
/// start handler that applies our affinity hint exactly once.
#[cfg(target_os = "macos")]
static FLASH_ATTN_POOL: LazyLock<ThreadPool> = LazyLock::new(|| {
    rayon::ThreadPoolBuilder::new()
        .start_handler(|_| unsafe {
            set_thread_affinity();
        })
        .build()
        .expect("Failed to build custom Rayon thread‑pool for flash‑attention")
});

// cowork patch (see PATCH.md, change 1): elsewhere than macOS the attention
// kernels run in rayon's global pool, on the thread that runs the forward pass
// (a pool worker, change 2), instead of a second pool of as many threads: two
// pools meant twice as many compute threads as cores, and a cold hand-off for
// every parallel loop.
#[cfg(target_os = "macos")]
fn attention_pool_install<R: Send>(op: impl FnOnce() -> R + Send) -> R {
    FLASH_ATTN_POOL.install(op)
}

#[cfg(not(target_os = "macos"))]
fn attention_pool_install<R: Send>(op: impl FnOnce() -> R + Send) -> R {
    op()
}

/// Size (in KV positions) processed by each inner‑tile job.
const TILE_KV: usize = 16;

// cowork patch (PATCH.md, change 3): eight independent partial sums, so LLVM
// vectorises the loop (one running sum forced a strict order of f32 adds).
const DOT_LANES: usize = 8;

/// Dot product in `f32` of two rows of any element types (a query row may
/// already be `f32` while the keys are not); AVX2 FMA when both are `f32`,
/// else eight lanes that LLVM can vectorise.
#[inline]
fn dot_f32<A: UpcastF32 + Copy, B: UpcastF32 + Copy>(a: &[A], b: &[B]) -> f32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    if let (Some(a), Some(b)) = (A::as_f32(a), B::as_f32(b)) {
        return dot_f32_simd(a, b);
    }
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut lanes = [0f32; DOT_LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(DOT_LANES), b.chunks_exact(DOT_LANES));
    let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
    for (x, y) in a_chunks.zip(b_chunks) {
        for i in 0..DOT_LANES {
            lanes[i] = x[i].to_f32().mul_add(y[i].to_f32(), lanes[i]);
        }
    }
    let mut sum = lanes.iter().sum::<f32>();
    for (x, y) in a_rest.iter().zip(b_rest) {
        sum += x.to_f32() * y.to_f32();
    }
    sum
}

/// Dot product of two `f32` rows with AVX2 FMA; LLVM left the eight-lane
/// loop below scalar.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
#[inline]
fn dot_f32_simd(a: &[f32], b: &[f32]) -> f32 {
    use core::arch::x86_64::*;
    let n = a.len().min(b.len());
    let mut i = 0;
    // SAFETY: every load reads 8 floats at i..i + 8 <= n of both slices.
    unsafe {
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        while i + 16 <= n {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i)), _mm256_loadu_ps(b.as_ptr().add(i)), acc0);
            acc1 = _mm256_fmadd_ps(
                _mm256_loadu_ps(a.as_ptr().add(i + 8)),
                _mm256_loadu_ps(b.as_ptr().add(i + 8)),
                acc1,
            );
            i += 16;
        }
        if i + 8 <= n {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i)), _mm256_loadu_ps(b.as_ptr().add(i)), acc0);
            i += 8;
        }
        let acc = _mm256_add_ps(acc0, acc1);
        let half = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        let quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
        let mut sum = _mm_cvtss_f32(_mm_add_ss(quarter, _mm_movehdup_ps(quarter)));
        for j in i..n {
            sum += a[j] * b[j];
        }
        sum
    }
}

/// The scores of four query rows (`q4`: four rows of `d`, in `f32`) against
/// one key row: the four dot products share each load of the key, and one
/// horizontal reduction sums all four (instead of one per score).
#[inline]
fn dot4_f32_rows<T: UpcastF32 + Copy>(q4: &[f32], k: &[T], d: usize) -> [f32; 4] {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    if let Some(k) = T::as_f32(k) {
        if d % 8 == 0 && k.len() >= d && q4.len() >= 4 * d {
            use core::arch::x86_64::*;
            // SAFETY: every load reads 8 floats inside q4[..4 * d] or k[..d].
            unsafe {
                let q = q4.as_ptr();
                let mut acc = [_mm256_setzero_ps(); 4];
                for j in (0..d).step_by(8) {
                    let kv = _mm256_loadu_ps(k.as_ptr().add(j));
                    for (r, acc) in acc.iter_mut().enumerate() {
                        *acc = _mm256_fmadd_ps(_mm256_loadu_ps(q.add(r * d + j)), kv, *acc);
                    }
                }
                let t01 = _mm256_hadd_ps(acc[0], acc[1]);
                let t23 = _mm256_hadd_ps(acc[2], acc[3]);
                let t = _mm256_hadd_ps(t01, t23);
                let sums = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
                let mut out = [0f32; 4];
                _mm_storeu_ps(out.as_mut_ptr(), sums);
                return out;
            }
        }
    }
    [
        dot_f32(&q4[..d], k),
        dot_f32(&q4[d..2 * d], k),
        dot_f32(&q4[2 * d..3 * d], k),
        dot_f32(&q4[3 * d..4 * d], k),
    ]
}

/// `scores[i] = exp(scores[i] - max)` in place (0 for a masked `-inf`),
/// returning their sum: eight at a time with `exp8`, the rest with `f32::exp`.
#[inline]
fn exp_row(scores: &mut [f32], max: f32) -> f32 {
    let mut sum = 0f32;
    let mut i = 0;
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    {
        use core::arch::x86_64::*;
        // SAFETY: every load and store touches scores[i..i + 8], i + 8 <= len.
        unsafe {
            let (m, ninf, mut acc) = (_mm256_set1_ps(max), _mm256_set1_ps(f32::NEG_INFINITY), _mm256_setzero_ps());
            while i + 8 <= scores.len() {
                let s = _mm256_loadu_ps(scores.as_ptr().add(i));
                let masked = _mm256_cmp_ps::<_CMP_EQ_OQ>(s, ninf);
                let p = _mm256_andnot_ps(masked, exp8(_mm256_sub_ps(s, m)));
                _mm256_storeu_ps(scores.as_mut_ptr().add(i), p);
                acc = _mm256_add_ps(acc, p);
                i += 8;
            }
            let half = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
            let quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
            sum += _mm_cvtss_f32(_mm_add_ss(quarter, _mm_movehdup_ps(quarter)));
        }
    }
    for s in &mut scores[i..] {
        *s = if *s == f32::NEG_INFINITY { 0.0 } else { (*s - max).exp() };
        sum += *s;
    }
    sum
}

/// `exp(x)` for eight lanes (Cephes' `expf`: range reduction by ln 2 in two
/// parts and a degree-5 polynomial; within 2 ulp of `f32::exp` for
/// x in [-87, 0], the softmax's range; below that it returns about 1e-38).
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
#[inline(always)]
unsafe fn exp8(x: core::arch::x86_64::__m256) -> core::arch::x86_64::__m256 {
    use core::arch::x86_64::*;
    let x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.336_55)), _mm256_set1_ps(88.376_26));
    let fx = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm256_mul_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E)),
    );
    let r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693_359_4), x);
    let r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.121_944_4e-4), r);
    let mut y = _mm256_set1_ps(1.987_569_1e-4);
    for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 5.000_000_1e-1] {
        y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(c));
    }
    let y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0)));
    let pow2n = _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)));
    _mm256_mul_ps(y, _mm256_castsi256_ps(pow2n))
}

/// `acc += p * v`, vectorisable.
#[inline]
fn axpy_f32_row<T: UpcastF32 + Copy>(acc: &mut [f32], p: f32, v: &[T]) {
    for (a, x) in acc.iter_mut().zip(v) {
        *a = x.to_f32().mul_add(p, *a);
    }
}

#[inline]
fn clamp_index(idx: usize, dim: usize) -> usize {
    if dim == 0 {
        0
    } else if idx >= dim {
        dim - 1
    } else {
        idx
    }
}

#[inline]
fn mask_offset(
    dims: &[usize],
    b: usize,
    h: usize,
    b_i: usize,
    h_i: usize,
    q_pos: usize,
    kv_pos: usize,
) -> Option<usize> {
    if dims.is_empty() {
        return Some(0);
    }

    match dims.len() {
        1 => {
            let kv_dim = dims[0];
            if kv_dim == 0 {
                None
            } else {
                Some(clamp_index(kv_pos, kv_dim))
            }
        }
        2 => {
            let q_dim = dims[0];
            let kv_dim = dims[1];
            if q_dim == 0 || kv_dim == 0 {
                None
            } else {
                let q_idx = clamp_index(q_pos, q_dim);
                let kv_idx = clamp_index(kv_pos, kv_dim);
                Some(q_idx * kv_dim + kv_idx)
            }
        }
        3 => {
            let d0 = dims[0];
            let d1 = dims[1];
            let d2 = dims[2];
            if d0 == 0 || d1 == 0 || d2 == 0 {
                return None;
            }
            let q_idx = clamp_index(q_pos, d1);
            let kv_idx = clamp_index(kv_pos, d2);
            if d0 == b || d0 == 1 {
                let b_idx = if d0 == 1 { 0 } else { clamp_index(b_i, d0) };
                Some((b_idx * d1 + q_idx) * d2 + kv_idx)
            } else if d0 == h || d0 == 1 {
                let h_idx = if d0 == 1 { 0 } else { clamp_index(h_i, d0) };
                Some((h_idx * d1 + q_idx) * d2 + kv_idx)
            } else if d0 == b.saturating_mul(h) {
                let combined_idx = clamp_index(b_i * h + h_i, d0);
                Some((combined_idx * d1 + q_idx) * d2 + kv_idx)
            } else {
                Some(q_idx * d2 + kv_idx)
            }
        }
        4 => {
            let d0 = dims[0];
            let d1 = dims[1];
            let d2 = dims[2];
            let d3 = dims[3];
            if d0 == 0 || d1 == 0 || d2 == 0 || d3 == 0 {
                return None;
            }
            let b_idx = if d0 == 1 {
                0
            } else if d0 == b {
                clamp_index(b_i, d0)
            } else if d0 == b.saturating_mul(h) {
                clamp_index(b_i * h + h_i, d0)
            } else {
                clamp_index(b_i, d0)
            };
            let h_idx = if d1 == 1 {
                0
            } else if d1 == h {
                clamp_index(h_i, d1)
            } else if d1 == b {
                clamp_index(b_i, d1)
            } else {
                clamp_index(h_i, d1)
            };
            let q_idx = clamp_index(q_pos, d2);
            let kv_idx = clamp_index(kv_pos, d3);
            Some(((b_idx * d1 + h_idx) * d2 + q_idx) * d3 + kv_idx)
        }
        _ => {
            let q_dim = *dims.get(dims.len().saturating_sub(2))?;
            let kv_dim = *dims.last()?;
            if q_dim == 0 || kv_dim == 0 {
                return None;
            }
            let q_idx = clamp_index(q_pos, q_dim);
            let kv_idx = clamp_index(kv_pos, kv_dim);
            let mut prefix_dim = 1usize;
            for &dim in &dims[..dims.len() - 2] {
                if dim == 0 {
                    return None;
                }
                prefix_dim = prefix_dim.saturating_mul(dim);
            }
            let combined_idx = if prefix_dim == 0 {
                0
            } else {
                let idx_val = b_i * h + h_i;
                idx_val.min(prefix_dim - 1)
            };
            Some((combined_idx * q_dim + q_idx) * kv_dim + kv_idx)
        }
    }
}

struct MaskInfo<'a> {
    data: &'a [f32],
    dims: &'a [usize],
    b: usize,
    h: usize,
}

impl<'a> MaskInfo<'a> {
    /// cowork patch (PATCH.md, change 3): the mask values of one query row
    /// over all `kv_len` keys, when they are contiguous in the mask (the usual
    /// case); `None` sends the caller to `value` for each pair.
    #[inline]
    fn row(&self, b_i: usize, h_i: usize, q_pos: usize, kv_len: usize) -> Option<&'a [f32]> {
        if kv_len == 0 || *self.dims.last()? != kv_len {
            return None;
        }
        let start = mask_offset(self.dims, self.b, self.h, b_i, h_i, q_pos, 0)?;
        let end = mask_offset(self.dims, self.b, self.h, b_i, h_i, q_pos, kv_len - 1)?;
        if end != start + kv_len - 1 {
            return None;
        }
        self.data.get(start..start + kv_len)
    }

    #[inline]
    fn value(&self, b_i: usize, h_i: usize, q_pos: usize, kv_pos: usize) -> f32 {
        if let Some(idx) = mask_offset(self.dims, self.b, self.h, b_i, h_i, q_pos, kv_pos) {
            *self.data.get(idx).unwrap_or(&0.0)
        } else {
            0.0
        }
    }
}

pub(crate) trait DowncastF32 {
    fn cast(x: f32) -> Self;
}

impl DowncastF32 for f32 {
    fn cast(x: f32) -> Self {
        x
    }
}

impl DowncastF32 for f16 {
    fn cast(x: f32) -> Self {
        f16::from_f32(x)
    }
}

impl DowncastF32 for bf16 {
    fn cast(x: f32) -> Self {
        bf16::from_f32(x)
    }
}

/// Up‑cast helper: convert any supported element type to `f32` once so that the
/// hot kernels can run entirely in `f32` and only down‑cast when writing out.
pub trait UpcastF32 {
    fn to_f32(self) -> f32;

    /// cowork patch (change 3): the slice itself when the type is `f32`, for
    /// the SIMD dot product.
    #[inline(always)]
    fn as_f32(_s: &[Self]) -> Option<&[f32]>
    where
        Self: Sized,
    {
        None
    }
}

impl UpcastF32 for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }

    #[inline(always)]
    fn as_f32(s: &[Self]) -> Option<&[f32]> {
        Some(s)
    }
}

impl UpcastF32 for f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self.to_f32()
    }
}

impl UpcastF32 for bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self.to_f32()
    }
}

pub fn run_flash_attn_cpu<T>(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    sdpa_params: &SdpaParams,
) -> Result<Tensor>
where
    T: WithDType + Sum + num_traits::real::Real + DowncastF32 + UpcastF32 + Copy,
{
    // Inline CPU slice extraction for q, k, v, and optional mask
    let (q_guard, q_layout) = q.storage_and_layout();
    let q_data: &[T] = if let Storage::Cpu(cpu) = &*q_guard {
        let data = cpu.as_slice::<T>().context("Expected CPU storage for q")?;
        &data[q_layout.start_offset()..]
    } else {
        return Err(candle_core::Error::Msg("Expected CPU storage for q".into()));
    };
    let (k_guard, k_layout) = k.storage_and_layout();
    let k_data: &[T] = if let Storage::Cpu(cpu) = &*k_guard {
        let data = cpu.as_slice::<T>().context("Expected CPU storage for k")?;
        &data[k_layout.start_offset()..]
    } else {
        return Err(candle_core::Error::Msg("Expected CPU storage for k".into()));
    };
    let (v_guard, v_layout) = v.storage_and_layout();
    let v_data: &[T] = if let Storage::Cpu(cpu) = &*v_guard {
        let data = cpu.as_slice::<T>().context("Expected CPU storage for v")?;
        &data[v_layout.start_offset()..]
    } else {
        return Err(candle_core::Error::Msg("Expected CPU storage for v".into()));
    };
    let mut mask_buffer: Option<Vec<f32>> = None;
    let mut mask_dims: Option<Vec<usize>> = None;
    if let Some(mask_tensor) = mask {
        mask_dims = Some(mask_tensor.shape().dims().to_vec());
        let buffer = {
            let (guard, layout) = mask_tensor.storage_and_layout();
            if let Storage::Cpu(cpu) = &*guard {
                let data = cpu
                    .as_slice::<T>()
                    .context("Expected CPU storage for mask")?;
                data[layout.start_offset()..]
                    .iter()
                    .map(|v| (*v).to_f32())
                    .collect::<Vec<f32>>()
            } else {
                return Err(candle_core::Error::Msg(
                    "Expected CPU storage for mask".into(),
                ));
            }
        };
        mask_buffer = Some(buffer);
    }
    // q_guard, k_guard, v_guard, and m_guard (if any) are kept in scope to hold storage alive

    let q_stride = q.stride();
    let k_stride = k.stride();
    let v_stride = v.stride();

    // Fast path for decode: q_len == 1
    let mask_dims_ref = mask_dims.as_deref();
    let mask_slice = mask_buffer.as_deref();

    if q.shape().dims()[1] == 1 {
        return flash_attn_cpu_single_q(
            q_data,
            k_data,
            v_data,
            mask_slice,
            mask_dims_ref,
            q.shape().dims(),
            k.shape().dims(),
            v.shape().dims(),
            q_stride,
            k_stride,
            v_stride,
            sdpa_params.softmax_scale,
            0.0,
            sdpa_params.softcap.unwrap_or(0.0),
        );
    }

    flash_attn_cpu(
        q_data,
        k_data,
        v_data,
        mask_slice,
        mask_dims_ref,
        q.shape().dims(),
        k.shape().dims(),
        v.shape().dims(),
        q_stride,
        k_stride,
        v_stride,
        sdpa_params.softmax_scale,
        0.0,
        sdpa_params.softcap.unwrap_or(0.0),
    )
}

/// Optimised path for the common decode case: q_len == 1 but kv_len ≫ 1.
/// All intermediate maths is done in `f32`; we down‑cast to `T` exactly once
/// when writing the output buffer.
#[allow(clippy::too_many_arguments)]
fn flash_attn_cpu_single_q<T>(
    q_data: &[T],
    k_data: &[T],
    v_data: &[T],
    mask_vec: Option<&[f32]>,
    mask_dims: Option<&[usize]>,
    qshape: &[usize],
    kshape: &[usize],
    vshape: &[usize],
    qstride: &[usize],
    kstride: &[usize],
    vstride: &[usize],
    scale: f32,
    max_bias: f32,
    logit_softcap: f32,
) -> Result<Tensor>
where
    T: WithDType + Copy + UpcastF32 + DowncastF32,
{
    let (b, _q_len, h, d) = (qshape[0], qshape[1], qshape[2], qshape[3]);
    let kv_len = kshape[1];
    let kv_tiles = kv_len.div_ceil(TILE_KV);
    let dv = d;

    // --- head tiling factors and softmax helper -----------------------
    let k_h = kshape[2];
    let v_h = vshape[2];
    let rk2 = h / k_h;
    let rv2 = h / v_h;
    let n2 = 2_usize.pow((h as f32).log2().ceil() as u32);

    // final output
    let mut out = vec![T::cast(0.0); b * h * dv];
    // scratch: one tile  ×  heads ×  dv  (flattened)
    let mut scratch = vec![0f32; kv_tiles * h * dv];
    let mut scratch_s = vec![0f32; kv_tiles * h]; // softmax S per tile
    let mut scratch_m = vec![f32::NEG_INFINITY; kv_tiles * h];

    // Store as plain usize so the capture is Sync (raw *mut T is not Sync)
    let scratch_ptr = scratch.as_mut_ptr() as usize;
    let scratch_s_ptr = scratch_s.as_mut_ptr() as usize;
    let scratch_m_ptr = scratch_m.as_mut_ptr() as usize;

    let mask_info = match (mask_vec, mask_dims) {
        (Some(data), Some(dims)) => Some(MaskInfo { data, dims, b, h }),
        _ => None,
    };

    attention_pool_install(|| {
        (0..kv_tiles).into_par_iter().for_each(|tile_idx| {
            let start = tile_idx * TILE_KV;
            let end = (start + TILE_KV).min(kv_len);

            for b_i in 0..b {
                for h_i in 0..h {
                    // Per‑head slope for ALiBi / NTK bias.
                    let slope = if max_bias > 0.0 {
                        2.0f32.powf(-max_bias * ((h_i + 1) as f32) / n2 as f32)
                    } else {
                        1.0
                    };
                    let k_head = h_i / rk2;
                    let v_head = h_i / rv2;

                    // pointers into scratch
                    let base_vk = ((tile_idx * h + h_i) * dv) as isize;
                    let base_s = (tile_idx * h + h_i) as isize;

                    let q_base = b_i * qstride[0] + h_i * qstride[2];
                    let q_row = &q_data[q_base..q_base + d];

                    // Re‑materialise the pointer from the captured usize.
                    let vkq: &mut [f32] = unsafe {
                        std::slice::from_raw_parts_mut(
                            (scratch_ptr as *mut f32).add(base_vk as usize),
                            dv,
                        )
                    };
                    // cowork patch (PATCH.md, change 12): the tile's scores first (SIMD
                    // dot products), then one max, the exponentials eight at a time
                    // (`exp_row`), and `p * V` added row by row with `axpy_f32_row`. Upstream
                    // rescaled the accumulator at every new maximum and called `expf` and a
                    // bounds-checked scalar loop per key: 17 % of SmolLM2's decode.
                    let mut scores = [0f32; TILE_KV];
                    let scores = &mut scores[..end - start];
                    for (kv_pos, score) in (start..end).zip(scores.iter_mut()) {
                        let k_base = b_i * kstride[0] + kv_pos * kstride[1] + k_head * kstride[2];
                        let mut s_val = dot_f32(q_row, &k_data[k_base..k_base + d]) * scale;
                        if logit_softcap != 0.0 {
                            s_val = logit_softcap * (s_val / logit_softcap).tanh();
                        }
                        if let Some(mask) = mask_info.as_ref() {
                            s_val += slope * mask.value(b_i, h_i, 0, kv_pos);
                        }
                        *score = s_val;
                    }
                    let m = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    // `vkq` starts at zero: `scratch` is zeroed and each (tile, head) has its own.
                    // A tile whose keys are all masked adds nothing (the reduction skips it).
                    let s = if m == f32::NEG_INFINITY {
                        0.0
                    } else {
                        let s = exp_row(scores, m);
                        for (kv_pos, &p) in (start..end).zip(scores.iter()) {
                            if p != 0.0 {
                                let v_base =
                                    b_i * vstride[0] + kv_pos * vstride[1] + v_head * vstride[2];
                                axpy_f32_row(vkq, p, &v_data[v_base..v_base + dv]);
                            }
                        }
                        s
                    };

                    unsafe {
                        *((scratch_s_ptr as *mut f32).add(base_s as usize)) = s;
                        *((scratch_m_ptr as *mut f32).add(base_s as usize)) = m;
                    }
                }
            }
        });
    });

    // -------- serial reduction over tiles (per head) --------
    for b_i in 0..b {
        for h_i in 0..h {
            let out_off = (b_i * h + h_i) * dv;

            // start with tile 0
            let mut vkq = vec![0f32; dv];
            vkq.copy_from_slice(&scratch[(h_i * dv)..(h_i * dv + dv)]);
            let mut s = scratch_s[h_i];
            let mut m = scratch_m[h_i];

            for tile_idx in 1..kv_tiles {
                let base = (tile_idx * h + h_i) * dv;
                let base_s = tile_idx * h + h_i;

                let m_b = scratch_m[base_s];
                let s_b = scratch_s[base_s];
                let vkq_b = &scratch[base..base + dv];
                if m_b == f32::NEG_INFINITY {
                    continue;
                }

                if m >= m_b {
                    let factor = (m_b - m).exp();
                    for (v, v_b) in vkq.iter_mut().zip(vkq_b) {
                        *v += v_b * factor;
                    }
                    s += s_b * factor;
                } else {
                    let factor = (m - m_b).exp();
                    for (v, v_a) in vkq.iter_mut().zip(vkq_b) {
                        *v = v_a + *v * factor;
                    }
                    s = s_b + s * factor;
                    m = m_b;
                }
            }

            let inv_s = 1.0 / s;
            for (o, v) in out[out_off..][..dv].iter_mut().zip(vkq.iter()) {
                *o = T::cast(*v * inv_s);
            }
        }
    }

    Tensor::from_vec(out, (b, h, 1, dv), &Device::Cpu)
}

/// Main forward flash-attention CPU routine.
/// Shapes follow Candle convention: (B, S, H, D)
#[allow(clippy::too_many_arguments)]
fn flash_attn_cpu<T>(
    q_data: &[T],
    k_data: &[T],
    v_data: &[T],
    mask_vec: Option<&[f32]>,
    mask_dims: Option<&[usize]>,
    qshape: &[usize],
    kshape: &[usize],
    vshape: &[usize],
    qstride: &[usize],
    kstride: &[usize],
    vstride: &[usize],
    scale: f32,
    max_bias: f32,
    logit_softcap: f32,
) -> Result<Tensor>
where
    T: WithDType + Copy + UpcastF32 + DowncastF32,
{
    let (b, q_len, h, d) = (qshape[0], qshape[1], qshape[2], qshape[3]);
    let kv_len = kshape[1];
    let k_h = kshape[2];
    let v_h = vshape[2];
    let rk2 = h / k_h;
    let rv2 = h / v_h;
    let dv = d;

    let n2 = 2_usize.pow((h as f32).log2().ceil() as u32);

    let mut out = vec![T::cast(0.0); b * q_len * h * dv];

    assert_eq!(qstride[3], 1, "q must have contiguous rows");
    assert_eq!(kstride[3], 1, "k must have contiguous rows");
    assert_eq!(vstride[3], 1, "v must have contiguous rows");

    let mask_info = match (mask_vec, mask_dims) {
        (Some(data), Some(dims)) => Some(MaskInfo { data, dims, b, h }),
        _ => None,
    };

    // cowork patch (PATCH.md, change 13): f32 rows go to the register-tiled kernels.
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    if let (Some(q), Some(k), Some(v)) = (T::as_f32(q_data), T::as_f32(k_data), T::as_f32(v_data)) {
        if d % 8 == 0 && dv % 8 == 0 && max_bias == 0.0 {
            let shape = tiled::Shape { b, h, k_h, q_len, kv_len, d, qstride, kstride, vstride };
            let out = tiled::attention(q, k, v, mask_info.as_ref(), &shape, scale, logit_softcap);
            return Tensor::from_vec(out, (b, h, q_len, dv), &Device::Cpu);
        }
    }

    // cowork patch (PATCH.md, change 3): queries in tiles of four rows of one
    // head, so each K and V row is read once per tile instead of once per
    // query; per row, the scores of all unmasked positions first (masked ones
    // are skipped, not computed: half of a causal prompt), then one exp per
    // score and one pass over V. The online softmax rescaled the whole output
    // row whenever the running maximum grew, and the dot product and V update
    // ran element by element; both are now written so LLVM vectorises them. A
    // contiguous mask row is read directly instead of recomputing its offset
    // for every (query, key) pair. Each row's arithmetic does not depend on
    // the tile it is in.
    const Q_TILE: usize = 4;
    let scale_applied = if logit_softcap != 0.0 {
        scale / logit_softcap
    } else {
        scale
    };
    let tiles_per_head = q_len.div_ceil(Q_TILE);
    // Tiles write disjoint rows of `out`.
    let out_addr = out.as_mut_ptr() as usize;
    attention_pool_install(|| {
        (0..b * h * tiles_per_head)
            .into_par_iter()
            .with_min_len(4)
            .for_each_init(
                || {
                    (
                        vec![Vec::<f32>::new(); Q_TILE],
                        vec![0f32; Q_TILE * d],
                        vec![0f32; Q_TILE * dv],
                    )
                },
                |(scores, q_rows, acc), tile| {
                    let bh = tile / tiles_per_head;
                    let (b_i, h_i) = (bh / h, bh % h);
                    let q0 = (tile % tiles_per_head) * Q_TILE;
                    let rows = Q_TILE.min(q_len - q0);

                    let slope = if max_bias > 0.0 {
                        2.0f32.powf(-max_bias * ((h_i + 1) as f32) / n2 as f32)
                    } else {
                        1.0
                    };
                    let k_head = h_i / rk2;
                    let v_head = h_i / rv2;

                    let mut mask_rows: [Option<&[f32]>; Q_TILE] = [None; Q_TILE];
                    for r in 0..rows {
                        let q_base = b_i * qstride[0] + (q0 + r) * qstride[1] + h_i * qstride[2];
                        for (dst, src) in q_rows[r * d..(r + 1) * d]
                            .iter_mut()
                            .zip(&q_data[q_base..q_base + d])
                        {
                            *dst = src.to_f32();
                        }
                        mask_rows[r] = mask_info
                            .as_ref()
                            .and_then(|mask| mask.row(b_i, h_i, q0 + r, kv_len));
                        scores[r].clear();
                        scores[r].resize(kv_len, f32::NEG_INFINITY);
                    }

                    let mut max = [f32::NEG_INFINITY; Q_TILE];
                    for kv_pos in 0..kv_len {
                        let k_base = b_i * kstride[0] + kv_pos * kstride[1] + k_head * kstride[2];
                        let k_row = &k_data[k_base..k_base + d];
                        let mut mvs = [f32::NEG_INFINITY; Q_TILE];
                        for (r, mv) in mvs.iter_mut().enumerate().take(rows) {
                            *mv = match (mask_rows[r], mask_info.as_ref()) {
                                (Some(row), _) => slope * row[kv_pos],
                                (None, Some(mask)) => {
                                    slope * mask.value(b_i, h_i, q0 + r, kv_pos)
                                }
                                (None, None) => 0.0,
                            };
                        }
                        if mvs.iter().all(|mv| *mv == f32::NEG_INFINITY) {
                            continue;
                        }
                        let dots = (rows == Q_TILE).then(|| dot4_f32_rows(q_rows, k_row, d));
                        for r in 0..rows {
                            let mv = mvs[r];
                            if mv == f32::NEG_INFINITY {
                                continue;
                            }
                            let dot = match dots {
                                Some(dots) => dots[r],
                                None => dot_f32(&q_rows[r * d..(r + 1) * d], k_row),
                            };
                            let mut s = dot * scale_applied;
                            if logit_softcap != 0.0 {
                                s = logit_softcap * s.tanh();
                            }
                            s += mv;
                            scores[r][kv_pos] = s;
                            max[r] = max[r].max(s);
                        }
                    }

                    acc.fill(0.0);
                    let mut sum = [0f32; Q_TILE];
                    for r in 0..rows {
                        sum[r] = exp_row(&mut scores[r], max[r]);
                    }
                    for kv_pos in 0..kv_len {
                        let v_base = b_i * vstride[0] + kv_pos * vstride[1] + v_head * vstride[2];
                        let v_row = &v_data[v_base..v_base + dv];
                        for r in 0..rows {
                            let p = scores[r][kv_pos];
                            if p == 0.0 {
                                continue;
                            }
                            axpy_f32_row(&mut acc[r * dv..(r + 1) * dv], p, v_row);
                        }
                    }

                    let out = out_addr as *mut T;
                    for r in 0..rows {
                        let inv_sum = if sum[r] > 0.0 { 1.0 / sum[r] } else { 0.0 };
                        let row_start = (bh * q_len + q0 + r) * dv;
                        for (i, v) in acc[r * dv..(r + 1) * dv].iter().enumerate() {
                            // SAFETY: row `q0 + r` of head `bh` is inside `out`
                            // (b * h * q_len rows of dv) and written by this tile only.
                            unsafe { *out.add(row_start + i) = T::cast(*v * inv_sum) };
                        }
                    }
                },
            );
    });

    let out_shape = (b, h, q_len, dv);
    Tensor::from_vec(out, out_shape, &Device::Cpu)
}

/// cowork patch (PATCH.md, change 13): prefill attention for f32 rows as two
/// small matrix products per tile of four queries, with the running sums in
/// registers. Keys are packed once per call into panels of 16 (for each
/// dimension, 16 keys side by side), so one step of the score kernel is two
/// loads of keys, four broadcasts of query values and eight FMAs, and the 64
/// scores come out as vectors (no horizontal sums); a panel whose 16 keys are
/// masked for all four queries is skipped. The weighted sum of V runs over the
/// keys that any of the four queries sees, 16 output columns at a time, again
/// with the sums in registers (the row-by-row version loaded and stored each
/// output row once per key).
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod tiled {
    use super::{exp_row, MaskInfo};
    use core::arch::x86_64::*;
    use rayon::prelude::*;

    /// Keys per panel: two AVX2 vectors.
    const PANEL: usize = 16;
    /// Query rows per tile (one head, consecutive positions).
    const ROWS: usize = 4;

    pub(super) struct Shape<'a> {
        pub b: usize,
        pub h: usize,
        pub k_h: usize,
        pub q_len: usize,
        pub kv_len: usize,
        /// Head dimension of Q, K and V (a multiple of 8).
        pub d: usize,
        pub qstride: &'a [usize],
        pub kstride: &'a [usize],
        pub vstride: &'a [usize],
    }

    /// Attention output `(b, h, q_len, d)` for queries `(b, q_len, h, d)` and keys and values
    /// `(b, kv_len, k_h, d)` (rows contiguous, any other strides).
    pub(super) fn attention(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        mask: Option<&MaskInfo<'_>>,
        s: &Shape<'_>,
        scale: f32,
        softcap: f32,
    ) -> Vec<f32> {
        let Shape { b, h, k_h, q_len, kv_len, d, qstride, kstride, vstride } = *s;
        let panels = kv_len.div_ceil(PANEL);
        let panel_len = d * PANEL;
        // K of each (batch, kv head) as panels; keys past kv_len are 0.
        let mut packed = vec![0f32; b * k_h * panels * panel_len];
        packed
            .par_chunks_mut(panels * panel_len)
            .enumerate()
            .for_each(|(bk, dst)| {
                let base = (bk / k_h) * kstride[0] + (bk % k_h) * kstride[2];
                for key in 0..kv_len {
                    let row = &k[base + key * kstride[1]..][..d];
                    let panel = &mut dst[(key / PANEL) * panel_len..][..panel_len];
                    for (j, x) in row.iter().enumerate() {
                        panel[j * PANEL + key % PANEL] = *x;
                    }
                }
            });

        let scale = if softcap != 0.0 { scale / softcap } else { scale };
        let tiles_per_head = q_len.div_ceil(ROWS);
        let mut out = vec![0f32; b * h * q_len * d];
        let out_addr = out.as_mut_ptr() as usize;
        (0..b * h * tiles_per_head)
            .into_par_iter()
            .with_min_len(4)
            .for_each_init(
                || Scratch {
                    q: vec![0f32; ROWS * d],
                    scores: vec![vec![0f32; panels * PANEL]; ROWS],
                    mask: vec![Vec::new(); ROWS],
                },
                |sc, tile| {
                    let bh = tile / tiles_per_head;
                    let (b_i, h_i) = (bh / h, bh % h);
                    let kv_head = h_i / (h / k_h);
                    let q0 = (tile % tiles_per_head) * ROWS;
                    let rows = ROWS.min(q_len - q0);
                    let packed = &packed[(b_i * k_h + kv_head) * panels * panel_len..][..panels * panel_len];

                    // The tile's queries (padding rows are 0) and mask rows.
                    sc.q.fill(0.0);
                    let mut mask_rows: [Option<&[f32]>; ROWS] = [None; ROWS];
                    for r in 0..rows {
                        let base = b_i * qstride[0] + (q0 + r) * qstride[1] + h_i * qstride[2];
                        sc.q[r * d..(r + 1) * d].copy_from_slice(&q[base..base + d]);
                    }
                    if let Some(mask) = mask {
                        for (r, scratch) in sc.mask.iter_mut().enumerate().take(rows) {
                            mask_rows[r] = Some(match mask.row(b_i, h_i, q0 + r, kv_len) {
                                Some(row) => row,
                                None => {
                                    scratch.clear();
                                    scratch.extend((0..kv_len).map(|j| mask.value(b_i, h_i, q0 + r, j)));
                                    scratch
                                }
                            });
                        }
                    }

                    // Scores, panel by panel; [lo, hi) spans the panels any row sees.
                    let (mut lo, mut hi) = (kv_len, 0);
                    for p in 0..panels {
                        let keys = p * PANEL..((p + 1) * PANEL).min(kv_len);
                        let seen = mask_rows[..rows].iter().any(|m| {
                            m.is_none_or(|m| m[keys.clone()].iter().any(|x| *x != f32::NEG_INFINITY))
                        });
                        if !seen {
                            for row in &mut sc.scores {
                                row[keys.clone()].fill(f32::NEG_INFINITY);
                            }
                            continue;
                        }
                        lo = lo.min(keys.start);
                        hi = keys.end;
                        // SAFETY: the panel holds d * PANEL floats, sc.q ROWS * d, and each
                        // score row panels * PANEL.
                        unsafe { scores_panel(&sc.q, &packed[p * panel_len..][..panel_len], d, &mut sc.scores, p * PANEL) };
                    }

                    let out = out_addr as *mut f32;
                    if lo >= hi {
                        // No query of the tile sees any key: its rows stay 0, as in the row-by-row kernel.
                        return;
                    }
                    let mut inv_sum = [0f32; ROWS];
                    for r in 0..ROWS {
                        let row = &mut sc.scores[r][lo..hi];
                        if r >= rows {
                            row.fill(0.0);
                            continue;
                        }
                        let max = finish_scores(row, mask_rows[r].map(|m| &m[lo..hi]), scale, softcap);
                        let sum = exp_row(row, max);
                        inv_sum[r] = if sum > 0.0 { 1.0 / sum } else { 0.0 };
                    }

                    let v_base = b_i * vstride[0] + kv_head * vstride[2];
                    let mut c0 = 0;
                    while c0 < d {
                        let width = if d - c0 >= 16 { 16 } else { 8 };
                        // SAFETY: keys lo..hi < kv_len and columns c0..c0 + width <= d are inside
                        // v; each score row holds hi entries; row q0 + r < q_len of head bh
                        // is inside `out` and written by this tile only.
                        unsafe {
                            let sums = weighted_values(&sc.scores, v, v_base, vstride[1], lo..hi, c0, width);
                            for r in 0..rows {
                                let dst = out.add((bh * q_len + q0 + r) * d + c0);
                                let f = _mm256_set1_ps(inv_sum[r]);
                                _mm256_storeu_ps(dst, _mm256_mul_ps(sums[r][0], f));
                                if width == 16 {
                                    _mm256_storeu_ps(dst.add(8), _mm256_mul_ps(sums[r][1], f));
                                }
                            }
                        }
                        c0 += width;
                    }
                },
            );
        out
    }

    struct Scratch {
        q: Vec<f32>,
        scores: Vec<Vec<f32>>,
        mask: Vec<Vec<f32>>,
    }

    /// `scores[r][at..at + PANEL]` = row r of `q` (ROWS rows of d) · the panel's 16 keys.
    #[inline]
    unsafe fn scores_panel(q: &[f32], panel: &[f32], d: usize, scores: &mut [Vec<f32>], at: usize) {
        let (qp, kp) = (q.as_ptr(), panel.as_ptr());
        let mut acc = [[_mm256_setzero_ps(); 2]; ROWS];
        for j in 0..d {
            let k0 = _mm256_loadu_ps(kp.add(j * PANEL));
            let k1 = _mm256_loadu_ps(kp.add(j * PANEL + 8));
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = _mm256_broadcast_ss(&*qp.add(r * d + j));
                acc[0] = _mm256_fmadd_ps(x, k0, acc[0]);
                acc[1] = _mm256_fmadd_ps(x, k1, acc[1]);
            }
        }
        for (row, acc) in scores.iter_mut().zip(acc) {
            _mm256_storeu_ps(row.as_mut_ptr().add(at), acc[0]);
            _mm256_storeu_ps(row.as_mut_ptr().add(at + 8), acc[1]);
        }
    }

    /// Dot products to scores in place (scale, softcap, mask) and their maximum.
    fn finish_scores(row: &mut [f32], mask: Option<&[f32]>, scale: f32, softcap: f32) -> f32 {
        if softcap != 0.0 {
            let mut max = f32::NEG_INFINITY;
            for (i, s) in row.iter_mut().enumerate() {
                if *s != f32::NEG_INFINITY {
                    *s = softcap * (*s * scale).tanh() + mask.map_or(0.0, |m| m[i]);
                }
                max = max.max(*s);
            }
            return max;
        }
        let mut i = 0;
        let mut max = f32::NEG_INFINITY;
        // SAFETY: every load and store touches row[i..i + 8] (and mask[i..i + 8]), i + 8 <= len.
        unsafe {
            let (sv, mut mv) = (_mm256_set1_ps(scale), _mm256_set1_ps(f32::NEG_INFINITY));
            while i + 8 <= row.len() {
                let p = row.as_mut_ptr().add(i);
                let add = mask.map_or(_mm256_setzero_ps(), |m| _mm256_loadu_ps(m.as_ptr().add(i)));
                let s = _mm256_fmadd_ps(_mm256_loadu_ps(p), sv, add);
                _mm256_storeu_ps(p, s);
                mv = _mm256_max_ps(mv, s);
                i += 8;
            }
            let mut lanes = [0f32; 8];
            _mm256_storeu_ps(lanes.as_mut_ptr(), mv);
            for x in lanes {
                max = max.max(x);
            }
        }
        for j in i..row.len() {
            row[j] = row[j] * scale + mask.map_or(0.0, |m| m[j]);
            max = max.max(row[j]);
        }
        max
    }

    /// For each of the ROWS score rows: the sum over keys of score × V[key][c0..c0 + width]
    /// (width 16 or 8: the second vector is unused for 8).
    #[inline]
    unsafe fn weighted_values(
        scores: &[Vec<f32>],
        v: &[f32],
        v_base: usize,
        key_stride: usize,
        keys: std::ops::Range<usize>,
        c0: usize,
        width: usize,
    ) -> [[__m256; 2]; ROWS] {
        let mut acc = [[_mm256_setzero_ps(); 2]; ROWS];
        let p: [*const f32; ROWS] = std::array::from_fn(|r| scores[r].as_ptr());
        let vp = v.as_ptr().add(v_base + c0);
        if width == 16 {
            for key in keys {
                let row = vp.add(key * key_stride);
                let (v0, v1) = (_mm256_loadu_ps(row), _mm256_loadu_ps(row.add(8)));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = _mm256_broadcast_ss(&*p[r].add(key));
                    acc[0] = _mm256_fmadd_ps(x, v0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(x, v1, acc[1]);
                }
            }
        } else {
            for key in keys {
                let v0 = _mm256_loadu_ps(vp.add(key * key_stride));
                for (r, acc) in acc.iter_mut().enumerate() {
                    acc[0] = _mm256_fmadd_ps(_mm256_broadcast_ss(&*p[r].add(key)), v0, acc[0]);
                }
            }
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::SdpaParams;
    use candle_core::{Device, Tensor, D};
    use candle_nn::ops::softmax;

    use candle_core::Result as CandleResult;

    const EPS: f32 = 1e-4;

    #[test]
    fn test_flash_attn_cpu_single_q() -> CandleResult<()> {
        // Test for q_len == 1 (single Q)
        let b = 1;
        let h = 2;
        let d = 4;
        let kv_len = 2;

        // Create q with shape (b, 1, h, d) filled with ones
        let q_vec = vec![1.0f32; b * h * d];
        let q = Tensor::from_vec(q_vec.clone(), (b, 1, h, d), &Device::Cpu)?;

        // Create k and v with shape (b, kv_len, h, d) filled with ones
        let k_vec = vec![1.0f32; b * kv_len * h * d];
        let v_vec = vec![1.0f32; b * kv_len * h * d];
        let k = Tensor::from_vec(k_vec.clone(), (b, kv_len, h, d), &Device::Cpu)?;
        let v = Tensor::from_vec(v_vec.clone(), (b, kv_len, h, d), &Device::Cpu)?;

        // SDPA parameters: scale = 1.0, no softcap
        let sdpa = SdpaParams {
            softmax_scale: 1.0,
            softcap: None,
            n_kv_groups: 1,
            sliding_window: None,
            sinks: None,
        };
        let scale = sdpa.softmax_scale;

        // Run the flash attention CPU function
        let out = run_flash_attn_cpu::<f32>(&q, &k, &v, None, &sdpa)?;
        // Expect output shape (b, h, 1, d)
        assert_eq!(out.shape().dims(), &[b, h, 1, d]);

        // Naive attention
        let q_perm = q.clone().permute((0, 2, 1, 3))?;
        let k_perm = k.clone().permute((0, 2, 1, 3))?;
        let v_perm = v.clone().permute((0, 2, 1, 3))?;

        let q_resh = q_perm.reshape(&[b * h, 1, d])?;
        let k_resh = k_perm.reshape(&[b * h, kv_len, d])?;
        let v_resh = v_perm.reshape(&[b * h, kv_len, d])?;

        let logits = (q_resh.matmul(&k_resh.transpose(1, 2)?)? * scale as f64)?;
        let weights = softmax(&logits, D::Minus1)?;

        let attn_out = weights.matmul(&v_resh)?;

        let naive_out = attn_out.reshape(&[b, h, 1, d])?;

        let flash_data = out.flatten_all()?.to_vec1::<f32>()?;
        let naive_data = naive_out.flatten_all()?.to_vec1::<f32>()?;
        for (f_val, n_val) in flash_data.iter().zip(naive_data.iter()) {
            assert!((f_val - n_val).abs() < EPS);
        }

        Ok(())
    }

    #[test]
    fn test_flash_attn_cpu_full_q() -> CandleResult<()> {
        // Test for q_len > 1 (full Q)
        let b = 1;
        let q_len = 2;
        let h = 2;
        let d = 4;
        let kv_len = 2;

        // Create q with shape (b, q_len, h, d) filled with ones
        let q_vec = vec![1.0f32; b * q_len * h * d];
        let q = Tensor::from_vec(q_vec.clone(), (b, q_len, h, d), &Device::Cpu)?;

        // Create k and v with shape (b, kv_len, h, d) filled with ones
        let k_vec = vec![1.0f32; b * kv_len * h * d];
        let v_vec = vec![1.0f32; b * kv_len * h * d];
        let k = Tensor::from_vec(k_vec.clone(), (b, kv_len, h, d), &Device::Cpu)?;
        let v = Tensor::from_vec(v_vec.clone(), (b, kv_len, h, d), &Device::Cpu)?;

        // SDPA parameters: scale = 1.0, no softcap
        let sdpa = SdpaParams {
            softmax_scale: 1.0,
            softcap: None,
            n_kv_groups: 1,
            sliding_window: None,
            sinks: None,
        };
        let scale = sdpa.softmax_scale;

        // Run the flash attention CPU function
        let out = run_flash_attn_cpu::<f32>(&q, &k, &v, None, &sdpa)?;
        // Expect output shape (b, h, q_len, d)
        assert_eq!(out.shape().dims(), &[b, h, q_len, d]);

        // Naive attention
        let q_perm = q.clone().permute((0, 2, 1, 3))?;
        let k_perm = k.clone().permute((0, 2, 1, 3))?;
        let v_perm = v.clone().permute((0, 2, 1, 3))?;

        let q_resh = q_perm.reshape(&[b * h, q_len, d])?;
        let k_resh = k_perm.reshape(&[b * h, kv_len, d])?;
        let v_resh = v_perm.reshape(&[b * h, kv_len, d])?;

        let logits = (q_resh.matmul(&k_resh.transpose(1, 2)?)? * scale as f64)?;
        let weights = softmax(&logits, D::Minus1)?;

        let attn_out = weights.matmul(&v_resh)?;

        let naive_out = attn_out.reshape(&[b, h, q_len, d])?;

        // 7) Compare element‐by‐element
        let flash_data = out.flatten_all()?.to_vec1::<f32>()?;
        let naive_data = naive_out.flatten_all()?.to_vec1::<f32>()?;
        for (f_val, n_val) in flash_data.iter().zip(naive_data.iter()) {
            assert!((f_val - n_val).abs() < EPS);
        }

        Ok(())
    }

    #[test]
    fn test_flash_attn_cpu_single_q_softcap() -> CandleResult<()> {
        // Test for q_len == 1 (single Q) with softcap
        let b = 1;
        let h = 2;
        let d = 4;
        let kv_len = 2;

        // Create q with shape (b, 1, h, d) filled with ones
        let q_vec = vec![1.0f32; b * h * d];
        let q = Tensor::from_vec(q_vec.clone(), (b, 1, h, d), &Device::Cpu)?;

        // Create k and v with shape (b, kv_len, h, d) filled with ones
        let k_vec = vec![1.0f32; b * kv_len * h * d];
        let v_vec = vec![1.0f32; b * kv_len * h * d];
        let k = Tensor::from_vec(k_vec.clone(), (b, kv_len, h, d), &Device::Cpu)?;
        let v = Tensor::from_vec(v_vec.clone(), (b, kv_len, h, d), &Device::Cpu)?;

        // SDPA parameters: scale = 1.0, softcap = Some(0.5)
        let sdpa = SdpaParams {
            softmax_scale: 1.0,
            softcap: Some(0.5),
            n_kv_groups: 1,
            sliding_window: None,
            sinks: None,
        };
        let scale = sdpa.softmax_scale;
        let sc = sdpa.softcap.unwrap();

        // Run the flash attention CPU function
        let out = run_flash_attn_cpu::<f32>(&q, &k, &v, None, &sdpa)?;
        // Expect output shape (b, h, 1, d)
        assert_eq!(out.shape().dims(), &[b, h, 1, d]);

        // Naive attention with softcap
        let q_perm = q.clone().permute((0, 2, 1, 3))?;
        let k_perm = k.clone().permute((0, 2, 1, 3))?;
        let v_perm = v.clone().permute((0, 2, 1, 3))?;

        let q_resh = q_perm.reshape(&[b * h, 1, d])?;
        let k_resh = k_perm.reshape(&[b * h, kv_len, d])?;
        let v_resh = v_perm.reshape(&[b * h, kv_len, d])?;

        let logits = (q_resh.matmul(&k_resh.transpose(1, 2)?)? * scale as f64)?;

        let logits = (logits / sc as f64)?;
        let logits = logits.tanh()?;
        let logits = (logits * sc as f64)?;

        let weights = softmax(&logits, D::Minus1)?;
        let attn_out = weights.matmul(&v_resh)?;
        let naive_out = attn_out.reshape(&[b, h, 1, d])?;

        let flash_data = out.flatten_all()?.to_vec1::<f32>()?;
        let naive_data = naive_out.flatten_all()?.to_vec1::<f32>()?;
        for (f_val, n_val) in flash_data.iter().zip(naive_data.iter()) {
            assert!((f_val - n_val).abs() < EPS);
        }
        Ok(())
    }

    #[test]
    fn test_flash_attn_cpu_full_q_softcap() -> CandleResult<()> {
        // Test for q_len > 1 (full Q) with softcap
        let b = 1;
        let q_len = 2;
        let h = 2;
        let d = 4;
        let kv_len = 2;

        // Create q with shape (b, q_len, h, d) filled with ones
        let q_vec = vec![1.0f32; b * q_len * h * d];
        let q = Tensor::from_vec(q_vec.clone(), (b, q_len, h, d), &Device::Cpu)?;

        // Create k and v with shape (b, kv_len, h, d) filled with ones
        let k_vec = vec![1.0f32; b * kv_len * h * d];
        let v_vec = vec![1.0f32; b * kv_len * h * d];
        let k = Tensor::from_vec(k_vec.clone(), (b, kv_len, h, d), &Device::Cpu)?;
        let v = Tensor::from_vec(v_vec.clone(), (b, kv_len, h, d), &Device::Cpu)?;

        // SDPA parameters: scale = 1.0, softcap = Some(0.5)
        let sdpa = SdpaParams {
            softmax_scale: 1.0,
            softcap: Some(0.5),
            n_kv_groups: 1,
            sliding_window: None,
            sinks: None,
        };
        let scale = sdpa.softmax_scale;
        let sc = sdpa.softcap.unwrap();

        // Run the flash attention CPU function
        let out = run_flash_attn_cpu::<f32>(&q, &k, &v, None, &sdpa)?;
        // Expect output shape (b, h, q_len, d)
        assert_eq!(out.shape().dims(), &[b, h, q_len, d]);

        // Naive attention with softcap
        let q_perm = q.clone().permute((0, 2, 1, 3))?;
        let k_perm = k.clone().permute((0, 2, 1, 3))?;
        let v_perm = v.clone().permute((0, 2, 1, 3))?;

        let q_resh = q_perm.reshape(&[b * h, q_len, d])?;
        let k_resh = k_perm.reshape(&[b * h, kv_len, d])?;
        let v_resh = v_perm.reshape(&[b * h, kv_len, d])?;

        let logits = (q_resh.matmul(&k_resh.transpose(1, 2)?)? * scale as f64)?;

        let logits = (logits / sc as f64)?;
        let logits = logits.tanh()?;
        let logits = (logits * sc as f64)?;

        let weights = softmax(&logits, D::Minus1)?;
        let attn_out = weights.matmul(&v_resh)?;
        let naive_out = attn_out.reshape(&[b, h, q_len, d])?;

        let flash_data = out.flatten_all()?.to_vec1::<f32>()?;
        let naive_data = naive_out.flatten_all()?.to_vec1::<f32>()?;
        for (f_val, n_val) in flash_data.iter().zip(naive_data.iter()) {
            assert!((f_val - n_val).abs() < EPS);
        }
        Ok(())
    }

    // cowork patch (PATCH.md, change 3): the query-tiled prefill kernel and
    // the SIMD decode dot product against attention computed in f64, on
    // random data shaped like a real prompt: grouped KV heads, a cached
    // prefix (kv_len > q_len), a causal mask given as a contiguous 2-D
    // tensor and as a broadcast 4-D one, a partial last tile, and softcap.
    fn lcg_vec(seed: &mut u64, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn attention_f64(
        q: &[f32], k: &[f32], v: &[f32], (b, q_len, h, d): (usize, usize, usize, usize),
        (kv_len, k_h): (usize, usize), past: usize, scale: f32, softcap: f32, window: usize,
    ) -> Vec<f64> {
        // Output (b, h, q_len, d); query i sees keys 0..=past + i, or only the last
        // `window` of them when window > 0.
        let mut out = vec![0f64; b * h * q_len * d];
        for b_i in 0..b {
            for h_i in 0..h {
                let kh = h_i / (h / k_h);
                for i in 0..q_len {
                    let qrow = &q[((b_i * q_len + i) * h + h_i) * d..][..d];
                    let seen = (past + i + 1).min(kv_len);
                    let first = if window > 0 { seen.saturating_sub(window) } else { 0 };
                    let scores: Vec<f64> = (first..seen)
                        .map(|j| {
                            let krow = &k[((b_i * kv_len + j) * k_h + kh) * d..][..d];
                            let dot: f64 = qrow.iter().zip(krow).map(|(x, y)| *x as f64 * *y as f64).sum();
                            let s = dot * scale as f64;
                            if softcap != 0.0 { softcap as f64 * (s / softcap as f64).tanh() } else { s }
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                    let total: f64 = weights.iter().sum();
                    let o = &mut out[((b_i * h + h_i) * q_len + i) * d..][..d];
                    for (j, w) in (first..seen).zip(&weights) {
                        let vrow = &v[((b_i * kv_len + j) * k_h + kh) * d..][..d];
                        for (o, x) in o.iter_mut().zip(vrow) {
                            *o += w / total * *x as f64;
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn tiled_prefill_and_simd_decode_match_attention_in_f64() -> CandleResult<()> {
        let dev = Device::Cpu;
        let mut seed = 7u64;
        // The window hides keys from the front as a sliding-window model's mask does: whole
        // panels of 16 keys are skipped at both ends of a tile's range.
        for &(b, q_len, h, k_h, d, past, softcap, mask_rank, window) in &[
            (1usize, 37usize, 4usize, 2usize, 64usize, 5usize, 0f32, 2usize, 0usize),
            (2, 22, 4, 1, 64, 0, 0.0, 4, 0),
            (1, 9, 2, 2, 72, 3, 30.0, 2, 0),
            (1, 70, 7, 1, 64, 30, 0.0, 2, 20),
            (1, 1, 4, 2, 64, 40, 0.0, 2, 0),
        ] {
            let kv_len = past + q_len;
            let q = lcg_vec(&mut seed, b * q_len * h * d);
            let k = lcg_vec(&mut seed, b * kv_len * k_h * d);
            let v = lcg_vec(&mut seed, b * kv_len * k_h * d);
            let scale = 1.0 / (d as f32).sqrt() * 4.0; // peaked softmax, as in real heads
            let mut mask = vec![0f32; q_len * kv_len];
            for i in 0..q_len {
                let seen = past + i + 1;
                for j in (seen..kv_len).chain(0..if window > 0 { seen.saturating_sub(window) } else { 0 }) {
                    mask[i * kv_len + j] = f32::NEG_INFINITY;
                }
            }
            let mask = match mask_rank {
                2 => Tensor::from_vec(mask, (q_len, kv_len), &dev)?,
                _ => Tensor::from_vec(mask, (1, 1, q_len, kv_len), &dev)?,
            };
            let sdpa = SdpaParams {
                softmax_scale: scale,
                softcap: (softcap != 0.0).then_some(softcap),
                n_kv_groups: h / k_h,
                sliding_window: None,
                sinks: None,
            };
            let out = run_flash_attn_cpu::<f32>(
                &Tensor::from_vec(q.clone(), (b, q_len, h, d), &dev)?,
                &Tensor::from_vec(k.clone(), (b, kv_len, k_h, d), &dev)?,
                &Tensor::from_vec(v.clone(), (b, kv_len, k_h, d), &dev)?,
                (q_len > 1).then_some(&mask),
                &sdpa,
            )?;
            assert_eq!(out.dims(), &[b, h, q_len, d]);
            let want = attention_f64(&q, &k, &v, (b, q_len, h, d), (kv_len, k_h), past, scale, softcap, window);
            let got = out.flatten_all()?.to_vec1::<f32>()?;
            let worst = got.iter().zip(&want).map(|(g, w)| (*g as f64 - w).abs()).fold(0f64, f64::max);
            assert!(worst < 2e-6, "q_len {q_len}, h {h}/{k_h}, d {d}: max error {worst}");

            // The same in f16 takes the row-by-row kernel (f32 rows take the tiled one):
            // the two agree up to f16's rounding of the inputs and output.
            let half = |x: &[f32], shape: (usize, usize, usize, usize)| {
                Tensor::from_vec(x.to_vec(), shape, &dev)?.to_dtype(candle_core::DType::F16)
            };
            let out16 = run_flash_attn_cpu::<f16>(
                &half(&q, (b, q_len, h, d))?,
                &half(&k, (b, kv_len, k_h, d))?,
                &half(&v, (b, kv_len, k_h, d))?,
                (q_len > 1).then(|| mask.to_dtype(candle_core::DType::F16)).transpose()?.as_ref(),
                &sdpa,
            )?;
            let got16 = out16.to_dtype(candle_core::DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
            let worst16 = got16.iter().zip(&want).map(|(g, w)| (*g as f64 - w).abs()).fold(0f64, f64::max);
            assert!(worst16 < 2e-2, "f16, q_len {q_len}, h {h}/{k_h}, d {d}: max error {worst16}");
        }
        Ok(())
    }

    /// A decode step whose mask hides whole tiles of keys (a sliding window, or padding) gets
    /// the attention over the visible keys alone: hidden tiles add nothing and never turn the
    /// reduction into NaN, also when the first tile is hidden.
    #[test]
    fn decode_skips_tiles_whose_keys_are_all_masked() -> CandleResult<()> {
        let dev = Device::Cpu;
        let (h, k_h, d, kv_len, hidden) = (4usize, 2usize, 64usize, 50usize, 2 * TILE_KV + 3);
        let mut seed = 11u64;
        let q = lcg_vec(&mut seed, h * d);
        let k = lcg_vec(&mut seed, kv_len * k_h * d);
        let v = lcg_vec(&mut seed, kv_len * k_h * d);
        let scale = 1.0 / (d as f32).sqrt() * 4.0;
        let mask: Vec<f32> = (0..kv_len)
            .map(|j| if j < hidden { f32::NEG_INFINITY } else { 0.0 })
            .collect();
        let sdpa = SdpaParams {
            softmax_scale: scale,
            softcap: None,
            n_kv_groups: h / k_h,
            sliding_window: None,
            sinks: None,
        };
        let out = run_flash_attn_cpu::<f32>(
            &Tensor::from_vec(q.clone(), (1, 1, h, d), &dev)?,
            &Tensor::from_vec(k.clone(), (1, kv_len, k_h, d), &dev)?,
            &Tensor::from_vec(v.clone(), (1, kv_len, k_h, d), &dev)?,
            Some(&Tensor::from_vec(mask, (1, kv_len), &dev)?),
            &sdpa,
        )?;
        let visible = kv_len - hidden;
        let want = attention_f64(
            &q,
            &k[hidden * k_h * d..],
            &v[hidden * k_h * d..],
            (1, 1, h, d),
            (visible, k_h),
            visible - 1,
            scale,
            0.0,
            0,
        );
        let got = out.flatten_all()?.to_vec1::<f32>()?;
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (*g as f64 - w).abs())
            .fold(0f64, f64::max);
        assert!(worst < 2e-6, "max error {worst}");
        Ok(())
    }
}
