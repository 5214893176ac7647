use super::k_quants::{
    BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ6K, BlockQ8K, BlockQ8_0,
    BlockQ8_1, QK8_0, QK8_1, QK_K,
};
use byteorder::{ByteOrder, LittleEndian};
use half::f16;

#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

// `vpdpwssd` as written: LLVM (generic tuning) splits many of them into
// `vpmaddwd` + `vpaddd`, one more instruction on the two 512-bit ports in the
// kernels' inner loops. For `#[target_feature(enable = "avx512vnni")]`
// functions only (a macro: the register class needs the feature).
macro_rules! dpwssd {
    ($acc:expr, $a:expr, $b:expr) => {{
        let mut acc: __m512i = $acc;
        let (a, b): (__m512i, __m512i) = ($a, $b);
        std::arch::asm!("vpdpwssd {acc}, {a}, {b}", acc = inout(zmm_reg) acc, a = in(zmm_reg) a, b = in(zmm_reg) b, options(pure, nomem, nostack, preserves_flags));
        acc
    }};
}

#[inline(always)]
pub(crate) unsafe fn sum_i16_pairs_float(x: __m256i) -> __m256 {
    let ones = _mm256_set1_epi16(1);
    let summed_pairs = _mm256_madd_epi16(ones, x);
    _mm256_cvtepi32_ps(summed_pairs)
}

#[inline(always)]
pub(crate) unsafe fn mul_sum_us8_pairs_float(ax: __m256i, sy: __m256i) -> __m256 {
    let dot = _mm256_maddubs_epi16(ax, sy);
    sum_i16_pairs_float(dot)
}

#[inline(always)]
pub(crate) unsafe fn hsum_float_8(x: __m256) -> f32 {
    let res = _mm256_extractf128_ps(x, 1);
    let res = _mm_add_ps(res, _mm256_castps256_ps128(x));
    let res = _mm_add_ps(res, _mm_movehl_ps(res, res));
    let res = _mm_add_ss(res, _mm_movehdup_ps(res));
    _mm_cvtss_f32(res)
}

#[inline(always)]
pub(crate) unsafe fn bytes_from_nibbles_32(rsi: *const u8) -> __m256i {
    let tmp = _mm_loadu_si128(rsi as *const __m128i);
    let bytes = _mm256_insertf128_si256::<1>(_mm256_castsi128_si256(tmp), _mm_srli_epi16(tmp, 4));
    let low_mask = _mm256_set1_epi8(0xF);
    _mm256_and_si256(low_mask, bytes)
}

#[inline(always)]
pub(crate) unsafe fn mul_sum_i8_pairs_float(x: __m256i, y: __m256i) -> __m256 {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    mul_sum_us8_pairs_float(ax, sy)
}

#[inline(always)]
pub(crate) fn vec_dot_q4_0_q8_0(n: usize, xs: &[BlockQ4_0], ys: &[BlockQ8_0]) -> f32 {
    debug_assert!(
        n.is_multiple_of(QK8_0),
        "vec_dot_q4_0_q8_0: {n} is not divisible by {QK8_0}"
    );
    unsafe {
        let mut acc = _mm256_setzero_ps();
        for (x, y) in xs.iter().zip(ys.iter()) {
            let d = _mm256_set1_ps(f16::to_f32(x.d) * f16::to_f32(y.d));
            let bx = bytes_from_nibbles_32(x.qs.as_ptr());
            let off = _mm256_set1_epi8(8);
            let bx = _mm256_sub_epi8(bx, off);
            let by = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
            let q = mul_sum_i8_pairs_float(bx, by);
            acc = _mm256_fmadd_ps(d, q, acc);
        }
        hsum_float_8(acc)
    }
}

/// cowork patch (PATCH.md, change 9): every Q8_0 kernel (this single row, the
/// decode rows and the prefill tiles, AVX2 or AVX-512 VNNI) computes a block's
/// integer dot exactly, then one FMA per block and output with `x.d * y.d`, in
/// block order: so all paths give the same bits. Four blocks' sums at a time.
#[inline(always)]
pub(crate) fn vec_dot_q8_0_q8_0(n: usize, xs: &[BlockQ8_0], ys: &[BlockQ8_0]) -> f32 {
    debug_assert!(
        n.is_multiple_of(QK8_0),
        "vec_dot_q8_0_q8_0: {n} is not divisible by {QK8_0}"
    );
    let nb = n / QK8_0;
    let (xs, ys) = (&xs[..nb], &ys[..nb]);
    // SAFETY: this module is compiled with AVX2, FMA and F16C.
    unsafe {
        let lanes = |i: usize| {
            let bx = _mm256_loadu_si256(xs[i].qs.as_ptr() as *const __m256i);
            let by = _mm256_loadu_si256(ys[i].qs.as_ptr() as *const __m256i);
            q8_0_lanes_avx2(bx, by)
        };
        let mut acc = 0f32;
        let mut i = 0;
        while i < nb {
            let k = (nb - i).min(4);
            let v: [__m256i; 4] = std::array::from_fn(|j| lanes(i + j.min(k - 1)));
            let mut sums = [0i32; 4];
            _mm_storeu_si128(sums.as_mut_ptr() as *mut __m128i, lane_sums4_avx2(v));
            for (j, sum) in sums.into_iter().take(k).enumerate() {
                let d = f16::to_f32(xs[i + j].d) * f16::to_f32(ys[i + j].d);
                acc = d.mul_add(sum as f32, acc);
            }
            i += k;
        }
        acc
    }
}

/// A Q8_0 block pair's products `x_i * y_i`, four to each of eight i32 lanes
/// (vpmaddubsw on |x| and sign(y, x) cannot saturate: 2 * 128 * 127 < 32767).
#[inline(always)]
unsafe fn q8_0_lanes_avx2(bx: __m256i, by: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(bx, bx), _mm256_sign_epi8(by, bx)), _mm256_set1_epi16(1))
}

// cowork patch (PATCH.md, change 1): ggml's AVX2 `ggml_vec_dot_q4_1_q8_1`.
// candle ran Q4_1 (all of SmolLM2-135M's Q4_1 file) through the generic kernel.
#[inline(always)]
pub(crate) fn vec_dot_q4_1_q8_1(n: usize, xs: &[BlockQ4_1], ys: &[BlockQ8_1]) -> f32 {
    debug_assert!(
        n.is_multiple_of(QK8_1),
        "vec_dot_q4_1_q8_1: {n} is not divisible by {QK8_1}"
    );
    unsafe {
        let mut acc = _mm256_setzero_ps();
        let mut summs = 0f32;
        for (x, y) in xs.iter().zip(ys.iter()) {
            summs += f16::to_f32(x.m) * f16::to_f32(y.s);
            let d = _mm256_set1_ps(f16::to_f32(x.d) * f16::to_f32(y.d));
            let qx = bytes_from_nibbles_32(x.qs.as_ptr());
            let qy = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
            let xy = mul_sum_us8_pairs_float(qx, qy);
            acc = _mm256_fmadd_ps(d, xy, acc);
        }
        hsum_float_8(acc) + summs
    }
}

// cowork patch (PATCH.md, change 5): four weight rows against one activation
// row, for a decode step's gemv. Each activation block is loaded once for the
// four rows and its two f16 scales converted once; the four rows' (d, m) scale
// pairs are converted in one vcvtph2ps and multiplied by (dy, sy) in one
// vmulps, and their m * s terms are summed in the same vector. Each row's
// arithmetic is that of `vec_dot_q4_1_q8_1`, in the same order, so the results
// are bit-identical to four calls.
#[cfg(target_feature = "f16c")]
#[inline(always)]
pub(crate) fn vec_dot_q4_1_q8_1_rows4(n: usize, xs: [&[BlockQ4_1]; 4], ys: &[BlockQ8_1]) -> [f32; 4] {
    debug_assert!(n.is_multiple_of(QK8_1));
    let nb = n / QK8_1;
    let (xs, ys) = (xs.map(|x| &x[..nb]), &ys[..nb]);
    let pair = |lo: f16, hi: f16| (lo.to_bits() as u32 | (hi.to_bits() as u32) << 16) as i32;
    // The gemv hands out consecutive groups of four rows: the same block of the
    // rows two groups on is fetched ahead (a row is only a few cache lines, too
    // short a stream for the hardware prefetcher to run ahead of).
    let ahead = 8 * std::mem::size_of_val(xs[0]);
    unsafe {
        let mut acc = [_mm256_setzero_ps(); 4];
        // Lane 2r + 1 sums row r's m * s; the even lanes are not used.
        let mut summs = _mm256_setzero_ps();
        for (i, y) in ys.iter().enumerate() {
            for x in xs {
                // A prefetch never faults, also past the end of the weights.
                _mm_prefetch::<_MM_HINT_T0>((x.as_ptr().add(i) as *const i8).wrapping_add(ahead));
            }
            let dy_sy = _mm256_cvtph_ps(_mm_set1_epi32(pair(y.d, y.s)));
            let dx_mx = _mm256_cvtph_ps(_mm_set_epi32(
                pair(xs[3][i].d, xs[3][i].m),
                pair(xs[2][i].d, xs[2][i].m),
                pair(xs[1][i].d, xs[1][i].m),
                pair(xs[0][i].d, xs[0][i].m),
            ));
            // [dx0 * dy, mx0 * sy, dx1 * dy, mx1 * sy, ...]
            let prod = _mm256_mul_ps(dx_mx, dy_sy);
            summs = _mm256_add_ps(summs, prod);
            let qy = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
            for (r, acc) in acc.iter_mut().enumerate() {
                let d = _mm256_permutevar8x32_ps(prod, _mm256_set1_epi32(2 * r as i32));
                let qx = bytes_from_nibbles_32(xs[r][i].qs.as_ptr());
                *acc = _mm256_fmadd_ps(d, mul_sum_us8_pairs_float(qx, qy), *acc);
            }
        }
        let mut m = [0f32; 8];
        _mm256_storeu_ps(m.as_mut_ptr(), summs);
        [
            hsum_float_8(acc[0]) + m[1],
            hsum_float_8(acc[1]) + m[3],
            hsum_float_8(acc[2]) + m[5],
            hsum_float_8(acc[3]) + m[7],
        ]
    }
}

// cowork patch (PATCH.md, change 2): one weight row against four activation
// rows. The weight block is loaded and unpacked once for the four rows, and the
// four sums are computed exactly as `vec_dot_q4_1_q8_1` computes each one, so
// the results are bit-identical to four separate calls.
#[inline(always)]
pub(crate) fn vec_dot_q4_1_q8_1_x4(n: usize, xs: &[BlockQ4_1], ys: [&[BlockQ8_1]; 4]) -> [f32; 4] {
    debug_assert!(n.is_multiple_of(QK8_1));
    let nb = n / QK8_1;
    let (y0, y1, y2, y3) = (&ys[0][..nb], &ys[1][..nb], &ys[2][..nb], &ys[3][..nb]);
    unsafe {
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut summs = [0f32; 4];
        for (i, x) in xs[..nb].iter().enumerate() {
            let dx = f16::to_f32(x.d);
            let mx = f16::to_f32(x.m);
            let qx = bytes_from_nibbles_32(x.qs.as_ptr());
            for (r, y) in [&y0[i], &y1[i], &y2[i], &y3[i]].into_iter().enumerate() {
                summs[r] += mx * f16::to_f32(y.s);
                let d = _mm256_set1_ps(dx * f16::to_f32(y.d));
                let qy = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
                acc[r] = _mm256_fmadd_ps(d, mul_sum_us8_pairs_float(qx, qy), acc[r]);
            }
        }
        [
            hsum_float_8(acc[0]) + summs[0],
            hsum_float_8(acc[1]) + summs[1],
            hsum_float_8(acc[2]) + summs[2],
            hsum_float_8(acc[3]) + summs[3],
        ]
    }
}

// cowork patch (PATCH.md, changes 2 and 9): Q8_0 tiles of outputs for the
// prefill matmul — one, two or four weight rows against four activation rows —
// and four weight rows against one activation row for a decode step. Each
// output is bit-identical to `vec_dot_q8_0_q8_0`: a block's exact integer dot,
// then one FMA with `x.d * y.d` per block. An activation block is loaded and
// its scale converted once for every weight row of the tile and a weight block
// once for the four activation rows; the four rows' f16 scales are converted in
// one vcvtph2ps. The integer sums of four outputs are gathered into one
// register (`half_sums4`), so a block's float work is one vcvtdq2ps, one vmulps
// and one FMA for eight outputs, and the accumulators take one register per two
// weight rows (the 2 × 4 tile of change 2 kept eight and spilled). With AVX-512
// VNNI (checked once at run time) a block pair's sums are one vpdpbusd of
// `x + 128` started from `-128 * (the lane's four activation values)`, computed
// once per activation block: the same integers without the two vpsignb.
#[inline(always)]
pub(crate) fn vec_dot_q8_0_q8_0_x4(n: usize, xs: &[BlockQ8_0], ys: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    q8_0_tile(n, [xs], ys)[0]
}

#[inline(always)]
pub(crate) fn vec_dot_q8_0_q8_0_2x4(
    n: usize,
    xs: [&[BlockQ8_0]; 2],
    ys: [&[BlockQ8_0]; 4],
) -> [[f32; 4]; 2] {
    q8_0_tile(n, xs, ys)
}

#[inline(always)]
pub(crate) fn vec_dot_q8_0_q8_0_4x4(
    n: usize,
    xs: [&[BlockQ8_0]; 4],
    ys: [&[BlockQ8_0]; 4],
) -> [[f32; 4]; 4] {
    q8_0_tile(n, xs, ys)
}

#[inline(always)]
fn q8_0_tile<const C: usize>(
    n: usize,
    xs: [&[BlockQ8_0]; C],
    ys: [&[BlockQ8_0]; 4],
) -> [[f32; 4]; C] {
    debug_assert!(n.is_multiple_of(QK8_0));
    let nb = n / QK8_0;
    let ys = [&ys[0][..nb], &ys[1][..nb], &ys[2][..nb], &ys[3][..nb]];
    let xs = xs.map(|x| &x[..nb]);
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vnni() {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { q8_0_tile_vnni(xs, ys) };
    }
    // SAFETY: this module is compiled with AVX2, FMA and F16C.
    unsafe { q8_0_tile_avx2(xs, ys) }
}

/// Four weight rows against one activation row (a decode step's gemv; Q8_0 is
/// most of Qwen2.5-0.5B's weights): the activation block loaded once, each
/// row's block eight blocks on prefetched (a row of 896 weights is 952 bytes,
/// too short for the hardware prefetcher).
#[inline(always)]
pub(crate) fn vec_dot_q8_0_q8_0_rows4(n: usize, xs: [&[BlockQ8_0]; 4], ys: &[BlockQ8_0]) -> [f32; 4] {
    debug_assert!(n.is_multiple_of(QK8_0));
    let nb = n / QK8_0;
    let (xs, ys) = (xs.map(|x| &x[..nb]), &ys[..nb]);
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vnni() {
        // SAFETY: the CPU has the features the function is compiled for; every row has `nb` blocks.
        return unsafe { q8_0_rows4_vnni(xs, ys) };
    }
    // SAFETY: AVX2, FMA and F16C are compiled in; every row has `nb` blocks.
    unsafe { q8_0_rows4_avx2(xs, ys) }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx512_vnni() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    static STATE: AtomicU8 = AtomicU8::new(0); // 0 unknown, 1 no, 2 yes
    match STATE.load(Ordering::Relaxed) {
        0 => {
            let yes = std::env::var_os("CANDLE_NO_AVX512").is_none()
                && is_x86_feature_detected!("avx512vnni")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512f");
            STATE.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
        state => state == 2,
    }
}

/// Four Q8_0 blocks' f16 scales, as f32 in one register.
#[inline(always)]
unsafe fn q8_0_scales4(d: [f16; 4]) -> __m128 {
    let packed = (d[0].to_bits() as u64)
        | (d[1].to_bits() as u64) << 16
        | (d[2].to_bits() as u64) << 32
        | (d[3].to_bits() as u64) << 48;
    _mm_cvtph_ps(_mm_set_epi64x(0, packed as i64))
}

/// A block pair's exact products in eight i32 lanes: `q8_0_lanes_avx2`, or
/// with VNNI one vpdpbusd of `x + 128` (x xor 0x80) from the bias.
macro_rules! q8_0_lanes {
    (avx2, $bx:expr, $by:expr, $bias:expr) => {{
        let _no_bias: __m256i = $bias;
        q8_0_lanes_avx2($bx, $by)
    }};
    (vnni, $bx:expr, $by:expr, $bias:expr) => {
        _mm256_dpbusd_epi32($bias, _mm256_xor_si256($bx, _mm256_set1_epi8(-128)), $by)
    };
}

/// The start of a block dot: none for AVX2; with VNNI `-128 * (the sum of each
/// i32 lane's four activation values)`, for the dot on `x + 128` (a macro:
/// closures and helpers without the caller's target features are not inlined
/// into it).
macro_rules! q8_0_bias {
    (avx2, $by:expr) => {
        _mm256_setzero_si256()
    };
    (vnni, $by:expr) => {
        _mm256_sub_epi32(
            _mm256_setzero_si256(),
            _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(-128), $by),
        )
    };
}

macro_rules! q8_0_tile_body {
    ($xs:expr, $ys:expr, $isa:ident) => {{
        let (xs, ys) = ($xs, $ys);
        // Output (c, r) in lane 4 * (c % 2) + r of acc[c / 2] (C = 1: lanes 0..4).
        let mut acc = [_mm256_setzero_ps(); C];
        for i in 0..ys[0].len() {
            let dy = q8_0_scales4([ys[0][i].d, ys[1][i].d, ys[2][i].d, ys[3][i].d]);
            let dy = _mm256_set_m128(dy, dy);
            let by: [__m256i; 4] = [
                _mm256_loadu_si256(ys[0][i].qs.as_ptr() as *const __m256i),
                _mm256_loadu_si256(ys[1][i].qs.as_ptr() as *const __m256i),
                _mm256_loadu_si256(ys[2][i].qs.as_ptr() as *const __m256i),
                _mm256_loadu_si256(ys[3][i].qs.as_ptr() as *const __m256i),
            ];
            let bias = [q8_0_bias!($isa, by[0]), q8_0_bias!($isa, by[1]), q8_0_bias!($isa, by[2]), q8_0_bias!($isa, by[3])];
            // [r0 r1 r2 r3 | r0 r1 r2 r3]: weight row c's four sums, each split in two halves.
            macro_rules! half_sums {
                ($c:expr) => {{
                    let bx = _mm256_loadu_si256(xs[$c][i].qs.as_ptr() as *const __m256i);
                    half_sums4([
                        q8_0_lanes!($isa, bx, by[0], bias[0]),
                        q8_0_lanes!($isa, bx, by[1], bias[1]),
                        q8_0_lanes!($isa, bx, by[2], bias[2]),
                        q8_0_lanes!($isa, bx, by[3], bias[3]),
                    ])
                }};
            }
            let mut c = 0;
            while c < C {
                let (sums, dx) = if c + 1 < C {
                    let (h0, h1) = (half_sums!(c), half_sums!(c + 1));
                    let sums = _mm256_add_epi32(
                        _mm256_permute2x128_si256::<0x20>(h0, h1),
                        _mm256_permute2x128_si256::<0x31>(h0, h1),
                    );
                    let dx = _mm256_set_m128(_mm_set1_ps(f16::to_f32(xs[c + 1][i].d)), _mm_set1_ps(f16::to_f32(xs[c][i].d)));
                    (sums, dx)
                } else {
                    let h = half_sums!(c);
                    (_mm256_add_epi32(h, _mm256_permute2x128_si256::<0x01>(h, h)), _mm256_set1_ps(f16::to_f32(xs[c][i].d)))
                };
                acc[c / 2] = _mm256_fmadd_ps(_mm256_mul_ps(dx, dy), _mm256_cvtepi32_ps(sums), acc[c / 2]);
                c += 2;
            }
        }
        let mut out = [[0f32; 4]; C];
        for c in 0..C {
            let mut lanes = [0f32; 8];
            _mm256_storeu_ps(lanes.as_mut_ptr(), acc[c / 2]);
            out[c].copy_from_slice(&lanes[4 * (c % 2)..4 * (c % 2) + 4]);
        }
        out
    }};
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_tile_avx2<const C: usize>(xs: [&[BlockQ8_0]; C], ys: [&[BlockQ8_0]; 4]) -> [[f32; 4]; C] {
    q8_0_tile_body!(xs, ys, avx2)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q8_0_tile_vnni<const C: usize>(xs: [&[BlockQ8_0]; C], ys: [&[BlockQ8_0]; 4]) -> [[f32; 4]; C] {
    q8_0_tile_body!(xs, ys, vnni)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_rows4_avx2(xs: [&[BlockQ8_0]; 4], ys: &[BlockQ8_0]) -> [f32; 4] {
    let mut acc = _mm_setzero_ps();
    for (i, y) in ys.iter().enumerate() {
        for x in xs {
            prefetch_ahead(x, i);
        }
        let d = _mm_mul_ps(q8_0_scales4([xs[0][i].d, xs[1][i].d, xs[2][i].d, xs[3][i].d]), _mm_set1_ps(f16::to_f32(y.d)));
        let by = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
        let row = |r: usize| q8_0_lanes_avx2(_mm256_loadu_si256(xs[r][i].qs.as_ptr() as *const __m256i), by);
        let sums = lane_sums4_avx2([row(0), row(1), row(2), row(3)]);
        acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(sums), acc);
    }
    let mut out = [0f32; 4];
    _mm_storeu_ps(out.as_mut_ptr(), acc);
    out
}

/// With VNNI two weight rows share a 512-bit register (`[row 0 | row 1]`,
/// `[row 2 | row 3]`), and the four rows' sums are gathered in 512-bit shuffles.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q8_0_rows4_vnni(xs: [&[BlockQ8_0]; 4], ys: &[BlockQ8_0]) -> [f32; 4] {
    let mut acc = _mm_setzero_ps();
    let flip = _mm512_set1_epi8(-128);
    // Lanes 0, 8, 1 and 9 of the folded sums: rows 0, 1, 2 and 3.
    let gather = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 1, 8, 0);
    for (i, y) in ys.iter().enumerate() {
        for x in xs {
            prefetch_ahead(x, i);
        }
        let d = _mm_mul_ps(q8_0_scales4([xs[0][i].d, xs[1][i].d, xs[2][i].d, xs[3][i].d]), _mm_set1_ps(f16::to_f32(y.d)));
        let by = _mm512_broadcast_i64x4(_mm256_loadu_si256(y.qs.as_ptr() as *const __m256i));
        let bias = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, by));
        let load = |r: usize| _mm256_loadu_si256(xs[r][i].qs.as_ptr() as *const __m256i);
        let (x01, x23) = (
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512(load(0)), load(1)),
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512(load(2)), load(3)),
        );
        let (a, b) = (
            _mm512_dpbusd_epi32(bias, _mm512_xor_si512(x01, flip), by),
            _mm512_dpbusd_epi32(bias, _mm512_xor_si512(x23, flip), by),
        );
        // Per 128-bit block: [a0+a2, b0+b2, a1+a3, b1+b3], then [Σa, Σb, ..].
        let t = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
        let t = _mm512_add_epi32(t, _mm512_shuffle_epi32::<0b01_00_11_10>(t));
        // Blocks 0 + 1 (rows 0 and 2), blocks 2 + 3 (rows 1 and 3).
        let t = _mm512_add_epi32(t, _mm512_shuffle_i32x4::<0b10_11_00_01>(t, t));
        let sums = _mm512_castsi512_si128(_mm512_permutexvar_epi32(gather, t));
        acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(sums), acc);
    }
    let mut out = [0f32; 4];
    _mm_storeu_ps(out.as_mut_ptr(), acc);
    out
}

#[inline(always)]
unsafe fn get_scale_shuffle(i: usize) -> __m128i {
    const K_SHUFFLE: [u8; 128] = [
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7,
        7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10, 10,
        11, 11, 11, 11, 11, 11, 11, 11, 12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13,
        13, 14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15,
    ];
    _mm_loadu_si128((K_SHUFFLE.as_ptr() as *const __m128i).add(i))
}

#[inline(always)]
unsafe fn get_scale_shuffle_k4(i: usize) -> __m256i {
    const K_SHUFFLE: [u8; 256] = [
        0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
        0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
        2, 3, 2, 3, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5,
        4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7,
        6, 7, 6, 7, 6, 7, 6, 7, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9,
        8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10,
        11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 12, 13, 12, 13, 12, 13,
        12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12,
        13, 12, 13, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15,
        14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15,
    ];
    _mm256_loadu_si256((K_SHUFFLE.as_ptr() as *const __m256i).add(i))
}

#[inline(always)]
unsafe fn get_scale_shuffle_q3k(i: usize) -> __m256i {
    const K_SHUFFLE: [u8; 128] = [
        0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
        2, 3, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7,
        6, 7, 6, 7, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 10, 11, 10, 11, 10, 11, 10, 11,
        10, 11, 10, 11, 10, 11, 10, 11, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12,
        13, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15,
    ];
    _mm256_loadu_si256((K_SHUFFLE.as_ptr() as *const __m256i).add(i))
}

#[inline(always)]
pub(crate) fn vec_dot_q6k_q8k(n: usize, xs: &[BlockQ6K], ys: &[BlockQ8K]) -> f32 {
    debug_assert!(
        n.is_multiple_of(QK_K),
        "vec_dot_q6k_8k: {n} is not divisible by {QK_K}"
    );

    let nb = n / QK_K;
    // SAFETY: AVX2, FMA and F16C are compiled in; the row has `nb` blocks.
    let [[out]] = unsafe { q6k_avx2([&xs[..nb]], [&ys[..nb]]) };
    out
}

// cowork patch (PATCH.md, change 8): every Q6_K kernel (AVX2 and AVX-512 VNNI,
// decode rows, single rows and prefill tiles) shares one arithmetic: a block's
// integer sum `Σ s_g Σ q_i y_i − 32 Σ s_g bsum_g` (the −32 offset of the 6-bit
// values taken once per block from the activation's 16-value sums, where the
// kernels of changes 4-7 subtracted `vpmaddubsw(32, y)` for every 32 values
// and weight row), exact in i32, then one FMA with `y.d * x.d` per block and
// output. So every path gives the same bits.

/// Lane `p` of the result: the sum of `v[p]`'s eight i32 lanes (exact).
#[inline(always)]
unsafe fn lane_sums4_avx2(v: [__m256i; 4]) -> __m128i {
    let h = half_sums4(v);
    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
}

/// A Q6_K block's `32 Σ_g s_g bsum_g` against an activation block, in eight i32 lanes.
#[inline(always)]
unsafe fn q6k_offsets(scales16: __m256i, y: &BlockQ8K) -> __m256i {
    let bsums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
    _mm256_slli_epi32::<5>(_mm256_madd_epi16(scales16, bsums))
}

/// `C` Q6_K weight rows against `R` (1 or 4) activation rows, with AVX2: 1 × 1
/// single rows, 1 × 4 prefill tiles, 2 × 1 decode rows (wider tiles spill registers).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6k_avx2<const C: usize, const R: usize>(xs: [&[BlockQ6K]; C], ys: [&[BlockQ8K]; R]) -> [[f32; R]; C] {
    let m4 = _mm256_set1_epi8(0xF);
    let m30 = _mm256_set1_epi8(0x30);
    // R > 1: lane r of acc[c] is weight row c against activation row r; R = 1: lane c of acc[0].
    let mut acc = [_mm_setzero_ps(); C];
    for i in 0..ys[0].len() {
        if R == 1 {
            for x in xs {
                prefetch_ahead(x, i);
            }
        }
        let mut sumi = [[_mm256_setzero_si256(); R]; C];
        for c in 0..C {
            let s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(xs[c][i].scales.as_ptr() as *const __m128i));
            for r in 0..R {
                sumi[c][r] = _mm256_sub_epi32(sumi[c][r], q6k_offsets(s16, &ys[r][i]));
            }
        }
        for j in 0..QK_K / 128 {
            for k in 0..4 {
                // Values 128 j + 32 k ..+ 32: nibbles of ql (low for k < 2), bits 2k, 2k + 1 of qh.
                let mut q = [_mm256_setzero_si256(); C];
                let mut sc = [_mm256_setzero_si256(); C];
                for c in 0..C {
                    let x = &xs[c][i];
                    let scales = _mm_loadu_si128(x.scales.as_ptr() as *const __m128i);
                    sc[c] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, get_scale_shuffle(4 * j + k)));
                    let ql = _mm256_loadu_si256(x.ql.as_ptr().add(64 * j + 32 * (k & 1)) as *const __m256i);
                    let ql = if k < 2 { ql } else { _mm256_srli_epi16::<4>(ql) };
                    let qh = _mm256_loadu_si256(x.qh.as_ptr().add(32 * j) as *const __m256i);
                    let qh = match k {
                        0 => _mm256_slli_epi16::<4>(qh),
                        1 => _mm256_slli_epi16::<2>(qh),
                        2 => qh,
                        _ => _mm256_srli_epi16::<2>(qh),
                    };
                    q[c] = _mm256_or_si256(_mm256_and_si256(ql, m4), _mm256_and_si256(qh, m30));
                }
                for r in 0..R {
                    let y = _mm256_loadu_si256(ys[r][i].qs.as_ptr().add(128 * j + 32 * k) as *const __m256i);
                    for c in 0..C {
                        sumi[c][r] = _mm256_add_epi32(sumi[c][r], _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], y), sc[c]));
                    }
                }
            }
        }
        if R == 1 {
            let s = lane_sums4_avx2(std::array::from_fn(|c| sumi[c.min(C - 1)][0]));
            let xd = _mm_set_ps(xs[3 % C][i].d.to_f32(), xs[2 % C][i].d.to_f32(), xs[1 % C][i].d.to_f32(), xs[0][i].d.to_f32());
            let d = _mm_mul_ps(_mm_set1_ps(ys[0][i].d), xd);
            acc[0] = _mm_fmadd_ps(d, _mm_cvtepi32_ps(s), acc[0]);
        } else {
            let yd = _mm_set_ps(ys[3 % R][i].d, ys[2 % R][i].d, ys[1 % R][i].d, ys[0][i].d);
            for c in 0..C {
                let s = lane_sums4_avx2(std::array::from_fn(|r| sumi[c][r.min(R - 1)]));
                let d = _mm_mul_ps(yd, _mm_set1_ps(xs[c][i].d.to_f32()));
                acc[c] = _mm_fmadd_ps(d, _mm_cvtepi32_ps(s), acc[c]);
            }
        }
    }
    let mut out = [[0f32; 4]; C];
    for c in 0..C {
        _mm_storeu_ps(out[c].as_mut_ptr(), acc[c]);
    }
    if R == 1 {
        return std::array::from_fn(|c| std::array::from_fn(|_| out[0][c]));
    }
    std::array::from_fn(|c| std::array::from_fn(|r| out[c][r]))
}

/// cowork patch (PATCH.md, change 6): four Q6_K weight rows against one
/// activation row (a decode step). With AVX-512 BW and VNNI, 128 weights a
/// step in two registers (the 6-bit values of two 32-weight groups each, their
/// high bits shifted per half with `vpsrlvw`), `vpmaddubsw` with the
/// activation, then `vpdpwssd` with the 16-weight groups' scales; the
/// activation's blocks loaded once for the four rows; the arithmetic every
/// Q6_K kernel shares (change 8), so every result is bit-identical to
/// `vec_dot_q6k_q8k`. Without the features, `q6k_avx2`.
#[inline(always)]
pub(crate) fn vec_dot_q6k_q8k_rows4(n: usize, xs: [&[BlockQ6K]; 4], ys: &[BlockQ8K]) -> [f32; 4] {
    debug_assert!(n.is_multiple_of(QK_K), "vec_dot_q6k_q8k_rows4: {n} is not divisible by {QK_K}");
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vnni() {
        let nb = n / QK_K;
        // SAFETY: the CPU has the features the function is compiled for; every row has `nb` blocks.
        return unsafe { q6k_rows4_vnni(xs.map(|x| &x[..nb]), &ys[..nb]) };
    }
    let nb = n / QK_K;
    // SAFETY: AVX2, FMA and F16C are compiled in; every row has `nb` blocks.
    // (Two rows at a time: four rows' unpacked values and scales spill.)
    let ys = [&ys[..nb]];
    let ([[a], [b]], [[c], [d]]) =
        unsafe { (q6k_avx2([&xs[0][..nb], &xs[1][..nb]], ys), q6k_avx2([&xs[2][..nb], &xs[3][..nb]], ys)) };
    [a, b, c, d]
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q6k_rows4_vnni(xs: [&[BlockQ6K]; 4], ys: &[BlockQ8K]) -> [f32; 4] {
    macro_rules! halves {
        ($lo:expr, $hi:expr) => {
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512($lo), $hi)
        };
    }
    let m4 = _mm512_set1_epi8(0xF);
    let m2 = _mm512_set1_epi8(3);
    // The high bits of the four 32-weight groups of a step: bits 0-1 and 2-3 of the same
    // 32 bytes for the first register, 4-5 and 6-7 for the second.
    let shift_a = halves!(_mm256_set1_epi16(0), _mm256_set1_epi16(2));
    let shift_b = halves!(_mm256_set1_epi16(4), _mm256_set1_epi16(6));
    // The scales' i16 lanes: register A of step j has groups 8j..8j+3 (eight lanes each), B 8j+4..8j+7.
    let mut scale_idx = [[_mm512_setzero_si512(); 2]; 2];
    for (j, idx) in scale_idx.iter_mut().enumerate() {
        for (half, idx) in idx.iter_mut().enumerate() {
            let first = (8 * j + 4 * half) as i16;
            *idx = halves!(
                _mm256_set_epi16(first + 1, first + 1, first + 1, first + 1, first + 1, first + 1, first + 1, first + 1, first, first, first, first, first, first, first, first),
                _mm256_set_epi16(first + 3, first + 3, first + 3, first + 3, first + 3, first + 3, first + 3, first + 3, first + 2, first + 2, first + 2, first + 2, first + 2, first + 2, first + 2, first + 2)
            );
        }
    }
    let mut acc = _mm_setzero_ps();
    let ahead = 8 * std::mem::size_of_val(xs[0]);
    for (i, y) in ys.iter().enumerate() {
        let q8 = y.qs.as_ptr();
        let q8v = [
            [_mm512_loadu_si512(q8 as *const _), _mm512_loadu_si512(q8.add(64) as *const _)],
            [_mm512_loadu_si512(q8.add(128) as *const _), _mm512_loadu_si512(q8.add(192) as *const _)],
        ];
        let mut sum8 = [_mm256_setzero_si256(); 4];
        let mut xd = [0f32; 4];
        for r in 0..4 {
            // The same block of the rows two groups on: its four cache lines.
            let next = (xs[r].as_ptr().add(i) as *const i8).wrapping_add(ahead);
            for line in 0..4 {
                _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(64 * line));
            }
            let x = &xs[r][i];
            xd[r] = x.d.to_f32();
            let s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(x.scales.as_ptr() as *const __m128i));
            let scales = _mm512_castsi256_si512(s16);
            let mut sumi = _mm512_setzero_si512();
            for j in 0..2 {
                let qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(x.qh.as_ptr().add(32 * j) as *const __m256i));
                let ql = _mm512_loadu_si512(x.ql.as_ptr().add(64 * j) as *const _);
                let h_a = _mm512_slli_epi16::<4>(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_a), m2));
                let h_b = _mm512_slli_epi16::<4>(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_b), m2));
                let q_a = _mm512_or_si512(_mm512_and_si512(ql, m4), h_a);
                let q_b = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16::<4>(ql), m4), h_b);
                sumi = dpwssd!(sumi, _mm512_maddubs_epi16(q_a, q8v[j][0]), _mm512_permutexvar_epi16(scale_idx[j][0], scales));
                sumi = dpwssd!(sumi, _mm512_maddubs_epi16(q_b, q8v[j][1]), _mm512_permutexvar_epi16(scale_idx[j][1], scales));
            }
            let sum = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64::<1>(sumi));
            sum8[r] = _mm256_sub_epi32(sum, q6k_offsets(s16, y));
        }
        let d = _mm_mul_ps(_mm_set1_ps(y.d), _mm_loadu_ps(xd.as_ptr()));
        acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(lane_sums4_avx2(sum8)), acc);
    }
    let mut out = [0f32; 4];
    _mm_storeu_ps(out.as_mut_ptr(), acc);
    out
}

// cowork patch (PATCH.md, changes 4 and 8): `vec_dot_q6k_q8k` for one weight
// row against four activation rows, the weight block's scales and 6-bit values
// unpacked once for the four rows (bit-identical to `vec_dot_q6k_q8k`).
#[inline(always)]
pub(crate) fn vec_dot_q6k_q8k_x4(n: usize, xs: &[BlockQ6K], ys: [&[BlockQ8K]; 4]) -> [f32; 4] {
    debug_assert!(n.is_multiple_of(QK_K));
    let nb = n / QK_K;
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vnni() {
        // SAFETY: the CPU has the features the function is compiled for; every row has `nb` blocks.
        let [out] = unsafe { q6k_tile_vnni([&xs[..nb]], ys.map(|y| &y[..nb])) };
        return out;
    }
    // SAFETY: AVX2, FMA and F16C are compiled in; every row has `nb` blocks.
    let [out] = unsafe { q6k_avx2([&xs[..nb]], ys.map(|y| &y[..nb])) };
    out
}

/// cowork patch (PATCH.md, change 7): `C` Q6_K weight rows against four
/// activation rows (a prefill tile) with AVX-512 BW and VNNI: each weight
/// block's 6-bit values and scales unpacked once for the four activation rows
/// (as in `q6k_rows4_vnni`), each activation block loaded once for the `C`
/// weight rows; the arithmetic every Q6_K kernel shares (change 8).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q6k_tile_vnni<const C: usize>(xs: [&[BlockQ6K]; C], ys: [&[BlockQ8K]; 4]) -> [[f32; 4]; C] {
    macro_rules! halves {
        ($lo:expr, $hi:expr) => {
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512($lo), $hi)
        };
    }
    let m4 = _mm512_set1_epi8(0xF);
    let m2 = _mm512_set1_epi8(3);
    let shift_a = halves!(_mm256_set1_epi16(0), _mm256_set1_epi16(2));
    let shift_b = halves!(_mm256_set1_epi16(4), _mm256_set1_epi16(6));
    let mut scale_idx = [[_mm512_setzero_si512(); 2]; 2];
    for (j, idx) in scale_idx.iter_mut().enumerate() {
        for (half, idx) in idx.iter_mut().enumerate() {
            let first = (8 * j + 4 * half) as i16;
            *idx = halves!(
                _mm256_set_epi16(first + 1, first + 1, first + 1, first + 1, first + 1, first + 1, first + 1, first + 1, first, first, first, first, first, first, first, first),
                _mm256_set_epi16(first + 3, first + 3, first + 3, first + 3, first + 3, first + 3, first + 3, first + 3, first + 2, first + 2, first + 2, first + 2, first + 2, first + 2, first + 2, first + 2)
            );
        }
    }
    let mut acc = [_mm_setzero_ps(); C];
    for i in 0..ys[0].len() {
        let mut scales = [_mm512_setzero_si512(); C];
        let mut offsets = [[_mm256_setzero_si256(); 4]; C];
        for c in 0..C {
            let s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(xs[c][i].scales.as_ptr() as *const __m128i));
            scales[c] = _mm512_castsi256_si512(s16);
            for r in 0..4 {
                offsets[c][r] = q6k_offsets(s16, &ys[r][i]);
            }
        }
        let mut sumi = [[_mm512_setzero_si512(); 4]; C];
        for j in 0..2 {
            let mut q_a = [_mm512_setzero_si512(); C];
            let mut q_b = [_mm512_setzero_si512(); C];
            let mut s_a = [_mm512_setzero_si512(); C];
            let mut s_b = [_mm512_setzero_si512(); C];
            for c in 0..C {
                let x = &xs[c][i];
                let qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(x.qh.as_ptr().add(32 * j) as *const __m256i));
                let ql = _mm512_loadu_si512(x.ql.as_ptr().add(64 * j) as *const _);
                let h_a = _mm512_slli_epi16::<4>(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_a), m2));
                let h_b = _mm512_slli_epi16::<4>(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_b), m2));
                q_a[c] = _mm512_or_si512(_mm512_and_si512(ql, m4), h_a);
                q_b[c] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16::<4>(ql), m4), h_b);
                s_a[c] = _mm512_permutexvar_epi16(scale_idx[j][0], scales[c]);
                s_b[c] = _mm512_permutexvar_epi16(scale_idx[j][1], scales[c]);
            }
            for r in 0..4 {
                let q8 = ys[r][i].qs.as_ptr().add(128 * j);
                let q8_a = _mm512_loadu_si512(q8 as *const _);
                let q8_b = _mm512_loadu_si512(q8.add(64) as *const _);
                for c in 0..C {
                    sumi[c][r] = dpwssd!(sumi[c][r], _mm512_maddubs_epi16(q_a[c], q8_a), s_a[c]);
                    sumi[c][r] = dpwssd!(sumi[c][r], _mm512_maddubs_epi16(q_b[c], q8_b), s_b[c]);
                }
            }
        }
        let yd = _mm_set_ps(ys[3][i].d, ys[2][i].d, ys[1][i].d, ys[0][i].d);
        for c in 0..C {
            // (A loop, not a closure: a closure does not inherit the target features.)
            let mut sum8 = [_mm256_setzero_si256(); 4];
            for r in 0..4 {
                let sum = _mm256_add_epi32(_mm512_castsi512_si256(sumi[c][r]), _mm512_extracti64x4_epi64::<1>(sumi[c][r]));
                sum8[r] = _mm256_sub_epi32(sum, offsets[c][r]);
            }
            let d = _mm_mul_ps(yd, _mm_set1_ps(xs[c][i].d.to_f32()));
            acc[c] = _mm_fmadd_ps(d, _mm_cvtepi32_ps(lane_sums4_avx2(sum8)), acc[c]);
        }
    }
    let mut out = [[0f32; 4]; C];
    for c in 0..C {
        _mm_storeu_ps(out[c].as_mut_ptr(), acc[c]);
    }
    out
}

/// cowork patch (PATCH.md, change 7): two Q6_K weight rows against four
/// activation rows — `q6k_tile_vnni` with AVX-512 VNNI, else two
/// `vec_dot_q6k_q8k_x4`.
#[inline(always)]
pub(crate) fn vec_dot_q6k_q8k_2x4(n: usize, xs: [&[BlockQ6K]; 2], ys: [&[BlockQ8K]; 4]) -> [[f32; 4]; 2] {
    debug_assert!(n.is_multiple_of(QK_K));
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vnni() {
        let nb = n / QK_K;
        // SAFETY: the CPU has the features the function is compiled for; every row has `nb` blocks.
        return unsafe { q6k_tile_vnni(xs.map(|x| &x[..nb]), ys.map(|y| &y[..nb])) };
    }
    // One weight row at a time: two rows' eight accumulators spill, and a
    // weight row's unpacking is shared by the four activation rows either way.
    xs.map(|x| vec_dot_q6k_q8k_x4(n, x, ys))
}

// cowork patch (PATCH.md, changes 4 and 8): `vec_dot_q4k_q8k` for one weight
// row against four activation rows: each weight block's scales, mins and
// nibbles unpacked once for the four rows, the arithmetic every Q4_K kernel
// shares (bit-identical to `vec_dot_q4k_q8k`).
#[inline(always)]
pub(crate) fn vec_dot_q4k_q8k_x4(n: usize, xs: &[BlockQ4K], ys: [&[BlockQ8K]; 4]) -> [f32; 4] {
    debug_assert!(n.is_multiple_of(QK_K));
    let nb = n / QK_K;
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vnni() {
        // SAFETY: the CPU has the features the function is compiled for; every row has `nb` blocks.
        let [out] = unsafe { q4k_tile_vnni([&xs[..nb]], ys.map(|y| &y[..nb])) };
        return out;
    }
    // SAFETY: AVX2, FMA and F16C are compiled in (this module needs them); every row has `nb` blocks.
    unsafe { q4k_row_avx2(&xs[..nb], ys.map(|y| &y[..nb])) }
}

/// cowork patch (PATCH.md, changes 7 and 8): four Q4_K weight rows against
/// four activation rows — `q4k_tile_vnni` with AVX-512 VNNI, else two AVX2
/// `q4k_pair_avx2` tiles.
#[inline(always)]
pub(crate) fn vec_dot_q4k_q8k_4x4(n: usize, xs: [&[BlockQ4K]; 4], ys: [&[BlockQ8K]; 4]) -> [[f32; 4]; 4] {
    debug_assert!(n.is_multiple_of(QK_K));
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vnni() {
        let nb = n / QK_K;
        // SAFETY: the CPU has the features the function is compiled for; every row has `nb` blocks.
        return unsafe { q4k_tile_vnni(xs.map(|x| &x[..nb]), ys.map(|y| &y[..nb])) };
    }
    let [a, b] = vec_dot_q4k_q8k_2x4(n, [xs[0], xs[1]], ys);
    let [c, d] = vec_dot_q4k_q8k_2x4(n, [xs[2], xs[3]], ys);
    [a, b, c, d]
}

/// cowork patch (PATCH.md, changes 7 and 8): two Q4_K weight rows against
/// four activation rows — `q4k_tile_vnni` with AVX-512 VNNI, else
/// `q4k_pair_avx2`.
#[inline(always)]
pub(crate) fn vec_dot_q4k_q8k_2x4(n: usize, xs: [&[BlockQ4K]; 2], ys: [&[BlockQ8K]; 4]) -> [[f32; 4]; 2] {
    debug_assert!(n.is_multiple_of(QK_K));
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vnni() {
        let nb = n / QK_K;
        // SAFETY: the CPU has the features the function is compiled for; every row has `nb` blocks.
        return unsafe { q4k_tile_vnni(xs.map(|x| &x[..nb]), ys.map(|y| &y[..nb])) };
    }
    let nb = n / QK_K;
    // SAFETY: AVX2, FMA and F16C are compiled in; every row has `nb` blocks.
    unsafe { q4k_pair_avx2(xs.map(|x| &x[..nb]), ys.map(|y| &y[..nb])) }
}

#[inline(always)]
unsafe fn mm256_set_m128i(a: __m128i, b: __m128i) -> __m256i {
    _mm256_insertf128_si256(_mm256_castsi128_si256(b), a, 1)
}

#[inline(always)]
pub(crate) fn vec_dot_q2k_q8k(n: usize, xs: &[BlockQ2K], ys: &[BlockQ8K]) -> f32 {
    debug_assert!(
        n.is_multiple_of(QK_K),
        "vec_dot_q2k_q8k: {n} is not divisible by {QK_K}"
    );

    unsafe {
        let m3 = _mm256_set1_epi8(3);
        let m4 = _mm_set1_epi8(0xF);

        let mut acc = _mm256_setzero_ps();

        for (x, y) in xs.iter().zip(ys.iter()) {
            let d = y.d * x.d.to_f32();
            let dmin = -y.d * x.dmin.to_f32();

            let mut q2 = x.qs.as_ptr();
            let mut q8 = y.qs.as_ptr();

            let mins_and_scales = _mm_loadu_si128(x.scales.as_ptr() as *const __m128i);
            let scales8 = _mm_and_si128(mins_and_scales, m4);
            let mins8 = _mm_and_si128(_mm_srli_epi16(mins_and_scales, 4), m4);
            let mins = _mm256_cvtepi8_epi16(mins8);
            let prod =
                _mm256_madd_epi16(mins, _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i));

            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&dmin), _mm256_cvtepi32_ps(prod), acc);

            let all_scales = _mm256_cvtepi8_epi16(scales8);
            let l_scales = _mm256_extracti128_si256(all_scales, 0);
            let h_scales = _mm256_extracti128_si256(all_scales, 1);
            let scales = [
                mm256_set_m128i(l_scales, l_scales),
                mm256_set_m128i(h_scales, h_scales),
            ];

            let mut sumi = _mm256_setzero_si256();

            for scale in scales {
                let q2bits = _mm256_loadu_si256(q2 as *const __m256i);
                q2 = q2.add(32);

                let q8_0 = _mm256_loadu_si256(q8 as *const __m256i);
                q8 = q8.add(32);
                let q8_1 = _mm256_loadu_si256(q8 as *const __m256i);
                q8 = q8.add(32);
                let q8_2 = _mm256_loadu_si256(q8 as *const __m256i);
                q8 = q8.add(32);
                let q8_3 = _mm256_loadu_si256(q8 as *const __m256i);
                q8 = q8.add(32);

                let q2_0 = _mm256_and_si256(q2bits, m3);
                let q2_1 = _mm256_and_si256(_mm256_srli_epi16(q2bits, 2), m3);
                let q2_2 = _mm256_and_si256(_mm256_srli_epi16(q2bits, 4), m3);
                let q2_3 = _mm256_and_si256(_mm256_srli_epi16(q2bits, 6), m3);

                let p0 = _mm256_maddubs_epi16(q2_0, q8_0);
                let p1 = _mm256_maddubs_epi16(q2_1, q8_1);
                let p2 = _mm256_maddubs_epi16(q2_2, q8_2);
                let p3 = _mm256_maddubs_epi16(q2_3, q8_3);

                let p0 =
                    _mm256_madd_epi16(_mm256_shuffle_epi8(scale, get_scale_shuffle_q3k(0)), p0);
                let p1 =
                    _mm256_madd_epi16(_mm256_shuffle_epi8(scale, get_scale_shuffle_q3k(1)), p1);
                let p2 =
                    _mm256_madd_epi16(_mm256_shuffle_epi8(scale, get_scale_shuffle_q3k(2)), p2);
                let p3 =
                    _mm256_madd_epi16(_mm256_shuffle_epi8(scale, get_scale_shuffle_q3k(3)), p3);

                let p0 = _mm256_add_epi32(p0, p1);
                let p2 = _mm256_add_epi32(p2, p3);

                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p2));
            }
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&d), _mm256_cvtepi32_ps(sumi), acc);
        }

        hsum_float_8(acc)
    }
}

#[inline(always)]
pub(crate) fn vec_dot_q3k_q8k(n: usize, xs: &[BlockQ3K], ys: &[BlockQ8K]) -> f32 {
    debug_assert!(
        n.is_multiple_of(QK_K),
        "vec_dot_q3k_q8k: {n} is not divisible by {QK_K}"
    );

    const KMASK1: u32 = 0x03030303;
    const KMASK2: u32 = 0x0f0f0f0f;

    let mut aux = [0u32; 3];

    unsafe {
        let m3 = _mm256_set1_epi8(3);
        let mone = _mm256_set1_epi8(1);
        let m32 = _mm_set1_epi8(32);

        let mut acc = _mm256_setzero_ps();
        for (x, y) in xs.iter().zip(ys.iter()) {
            let d = y.d * x.d.to_f32();

            let mut q3 = x.qs.as_ptr();
            let mut q8 = y.qs.as_ptr();

            LittleEndian::read_u32_into(&x.scales, &mut aux);
            let scales128 = _mm_set_epi32(
                (((aux[1] >> 4) & KMASK2) | (((aux[2] >> 6) & KMASK1) << 4)) as i32,
                (((aux[0] >> 4) & KMASK2) | (((aux[2] >> 4) & KMASK1) << 4)) as i32,
                ((aux[1] & KMASK2) | (((aux[2] >> 2) & KMASK1) << 4)) as i32,
                ((aux[0] & KMASK2) | (((aux[2]) & KMASK1) << 4)) as i32,
            );
            let scales128 = _mm_sub_epi8(scales128, m32);
            let all_scales = _mm256_cvtepi8_epi16(scales128);
            let l_scales = _mm256_extracti128_si256(all_scales, 0);
            let h_scales = _mm256_extracti128_si256(all_scales, 1);
            let scales = [
                mm256_set_m128i(l_scales, l_scales),
                mm256_set_m128i(h_scales, h_scales),
            ];

            // high bit
            let hbits = _mm256_loadu_si256(x.hmask.as_ptr() as *const __m256i);

            let mut sumi = _mm256_setzero_si256();

            for (j, scale) in scales.iter().enumerate() {
                // load low 2 bits
                let q3bits = _mm256_loadu_si256(q3 as *const __m256i);
                q3 = q3.add(32);

                // Prepare low and high bits
                // We hardcode the shifts here to avoid loading them into a separate register
                let q3l_0 = _mm256_and_si256(q3bits, m3);
                let q3h_0 = if j == 0 {
                    _mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, 0)), 0)
                } else {
                    _mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, 4)), 4)
                };
                let q3h_0 = _mm256_slli_epi16(q3h_0, 2);

                let q3l_1 = _mm256_and_si256(_mm256_srli_epi16(q3bits, 2), m3);
                let q3h_1 = if j == 0 {
                    _mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, 1)), 1)
                } else {
                    _mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, 5)), 5)
                };
                let q3h_1 = _mm256_slli_epi16(q3h_1, 2);

                let q3l_2 = _mm256_and_si256(_mm256_srli_epi16(q3bits, 4), m3);
                let q3h_2 = if j == 0 {
                    _mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, 2)), 2)
                } else {
                    _mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, 6)), 6)
                };
                let q3h_2 = _mm256_slli_epi16(q3h_2, 2);

                let q3l_3 = _mm256_and_si256(_mm256_srli_epi16(q3bits, 6), m3);
                let q3h_3 = if j == 0 {
                    _mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, 3)), 3)
                } else {
                    _mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, 7)), 7)
                };
                let q3h_3 = _mm256_slli_epi16(q3h_3, 2);

                // load Q8 quants
                let q8_0 = _mm256_loadu_si256(q8 as *const __m256i);
                q8 = q8.add(32);
                let q8_1 = _mm256_loadu_si256(q8 as *const __m256i);
                q8 = q8.add(32);
                let q8_2 = _mm256_loadu_si256(q8 as *const __m256i);
                q8 = q8.add(32);
                let q8_3 = _mm256_loadu_si256(q8 as *const __m256i);
                q8 = q8.add(32);

                // Dot product: we multiply the 2 low bits and 1 high bit part separately, so we
                // can use _mm256_maddubs_epi16, and then subtract. The high bit part has the 2
                // already subtracted (and so, it is zero if the high bit was not set, and 2 if the
                // high bit was set)
                let q8s_0 = _mm256_maddubs_epi16(q3h_0, q8_0);
                let q8s_1 = _mm256_maddubs_epi16(q3h_1, q8_1);
                let q8s_2 = _mm256_maddubs_epi16(q3h_2, q8_2);
                let q8s_3 = _mm256_maddubs_epi16(q3h_3, q8_3);

                let p16_0 = _mm256_maddubs_epi16(q3l_0, q8_0);
                let p16_1 = _mm256_maddubs_epi16(q3l_1, q8_1);
                let p16_2 = _mm256_maddubs_epi16(q3l_2, q8_2);
                let p16_3 = _mm256_maddubs_epi16(q3l_3, q8_3);

                let p16_0 = _mm256_sub_epi16(p16_0, q8s_0);
                let p16_1 = _mm256_sub_epi16(p16_1, q8s_1);
                let p16_2 = _mm256_sub_epi16(p16_2, q8s_2);
                let p16_3 = _mm256_sub_epi16(p16_3, q8s_3);

                // multiply with scales
                let p16_0 =
                    _mm256_madd_epi16(_mm256_shuffle_epi8(*scale, get_scale_shuffle_q3k(0)), p16_0);
                let p16_1 =
                    _mm256_madd_epi16(_mm256_shuffle_epi8(*scale, get_scale_shuffle_q3k(1)), p16_1);
                let p16_2 =
                    _mm256_madd_epi16(_mm256_shuffle_epi8(*scale, get_scale_shuffle_q3k(2)), p16_2);
                let p16_3 =
                    _mm256_madd_epi16(_mm256_shuffle_epi8(*scale, get_scale_shuffle_q3k(3)), p16_3);

                // accumulate
                let p16_0 = _mm256_add_epi32(p16_0, p16_1);
                let p16_2 = _mm256_add_epi32(p16_2, p16_3);
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16_0, p16_2));
            }

            // multiply with block scale and accumulate
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&d), _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_float_8(acc)
    }
}

#[inline(always)]
pub(crate) fn vec_dot_q4k_q8k(n: usize, xs: &[BlockQ4K], ys: &[BlockQ8K]) -> f32 {
    debug_assert!(
        n.is_multiple_of(QK_K),
        "vec_dot_q4k_q8k: {n} is not divisible by {QK_K}"
    );
    // cowork patch (PATCH.md, changes 7 and 8): the arithmetic the decode rows
    // and prefill tiles share (so every path gives the same bits).
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vnni() {
        let nb = n / QK_K;
        // SAFETY: the CPU has the features the function is compiled for; the row has `nb` blocks.
        let [out] = unsafe { q4k_rows_vnni([&xs[..nb]], &ys[..nb]) };
        return out;
    }
    let nb = n / QK_K;
    // SAFETY: AVX2, FMA and F16C are compiled in; the row has `nb` blocks.
    let [out] = unsafe { q4k_row_avx2(&xs[..nb], [&ys[..nb]]) };
    out
}

/// cowork patch (PATCH.md, changes 6 and 7): four Q4_K weight rows against
/// one activation row (a decode step). With AVX-512 BW and VNNI,
/// `q4k_rows_vnni` (128 weights a step, `vpmaddubsw` then `vpdpwssd` with the
/// sub-blocks' scales, the activation's blocks loaded once for the four rows;
/// its arithmetic is the prefill tiles', so a prompt's rows come out
/// bit-identical). Without them, two AVX2 `q4k_pair_avx2` calls (change 8).
#[inline(always)]
pub(crate) fn vec_dot_q4k_q8k_rows4(n: usize, xs: [&[BlockQ4K]; 4], ys: &[BlockQ8K]) -> [f32; 4] {
    debug_assert!(n.is_multiple_of(QK_K), "vec_dot_q4k_q8k_rows4: {n} is not divisible by {QK_K}");
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vnni() {
        let nb = n / QK_K;
        // SAFETY: the CPU has the features the function is compiled for; every row has `nb` blocks.
        return unsafe { q4k_rows_vnni(xs.map(|x| &x[..nb]), &ys[..nb]) };
    }
    let nb = n / QK_K;
    let ys = &ys[..nb];
    // SAFETY: AVX2, FMA and F16C are compiled in; every row has `nb` blocks.
    let ([[a], [b]], [[c], [d]]) =
        unsafe { (q4k_pair_avx2([&xs[0][..nb], &xs[1][..nb]], [ys]), q4k_pair_avx2([&xs[2][..nb], &xs[3][..nb]], [ys])) };
    [a, b, c, d]
}

// cowork patch (PATCH.md, change 8): the AVX2 Q4_K kernels share the VNNI
// kernels' arithmetic (exact per-block integer sums, then one FMA per block and
// output for `y.d * x.d` and one for `-y.d * x.dmin`), so every Q4_K path —
// decode rows, single rows, prefill tiles, AVX2 or AVX-512 — gives the same
// bits. Two weight rows are interleaved by 16-byte halves (`[A 0..15 | B
// 0..15]`, `[A 16..31 | B 16..31]`), so two `vpmaddubsw` of one sub-block add in
// i16 (|sum| <= 4 * 15 * 128) before the one `vpmaddwd` with the sub-blocks'
// scales — five instructions for 64 products where one row needs six — and the
// per-block float work is done for eight outputs at once.

/// Decode (one activation row): prefetch the block of `row` eight blocks on —
/// rows are too short for the hardware prefetcher (as in `q4k_rows_vnni`).
#[inline(always)]
unsafe fn prefetch_ahead<T>(row: &[T], i: usize) {
    let next = (row.as_ptr().wrapping_add(i + 8)) as *const i8;
    for line in 0..std::mem::size_of::<T>().div_ceil(64) {
        _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(64 * line));
    }
}

/// Sub-block `k`'s activation sum in i16 lane `k` (`bsums[2k] + bsums[2k + 1]`, |.| <= 4096).
#[inline(always)]
unsafe fn q8k_sub_sums(y: &BlockQ8K) -> __m128i {
    let q8sums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
    _mm_hadd_epi16(_mm256_extracti128_si256::<0>(q8sums), _mm256_extracti128_si256::<1>(q8sums))
}

/// Lane `r` (0..4) of each 128-bit half: the sum of that half's four i32 lanes of `v[r]` (exact).
#[inline(always)]
unsafe fn half_sums4(v: [__m256i; 4]) -> __m256i {
    _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]))
}

/// A Q4_K block's packed scales and the four bytes after them (16 bytes, in the block).
#[inline(always)]
unsafe fn q4k_scale_bytes(x: &BlockQ4K) -> __m128i {
    let p = (x as *const BlockQ4K as *const u8).add(std::mem::offset_of!(BlockQ4K, scales));
    _mm_loadu_si128(p as *const __m128i)
}

/// A Q4_K block's packed six-bit scales and mins unpacked in SIMD (llama.cpp's
/// `utmp` bit work) for the blocks in each 128-bit lane of `v`
/// (`q4k_scale_bytes`): the six-bit scales in bytes 0-7 and mins in 8-15 of each lane.
#[inline(always)]
unsafe fn q4k_unpack_scales(v: __m256i) -> __m256i {
    let (k1, k2, k3) = (_mm256_set1_epi32(0x3f3f3f3f), _mm256_set1_epi32(0x0f0f0f0f), _mm256_set1_epi32(0x03030303));
    let p = _mm256_shuffle_epi32::<0b10_01_10_00>(v); // u0 u2 u1 u2
    let q = _mm256_shuffle_epi32::<0b01_01_00_00>(v); // u0 u0 u1 u1
    let hi = _mm256_or_si256(
        _mm256_and_si256(_mm256_srlv_epi32(p, _mm256_set_epi32(4, 0, 0, 0, 4, 0, 0, 0)), k2),
        _mm256_slli_epi32::<4>(_mm256_and_si256(_mm256_srli_epi32::<6>(q), k3)),
    );
    _mm256_blend_epi32::<0b1010_1010>(_mm256_and_si256(p, k1), hi)
}

/// A Q4_K block's scales (i16 lanes 0-7) and mins (lanes 8-15).
#[inline(always)]
unsafe fn q4k_mins_and_scales_avx2(x: &BlockQ4K) -> __m256i {
    let u = q4k_unpack_scales(_mm256_castsi128_si256(q4k_scale_bytes(x)));
    _mm256_cvtepu8_epi16(_mm256_castsi256_si128(u))
}

/// Two Q4_K weight rows against `R` (1 or 4) activation rows: a decode step's
/// pair of rows (`R` = 1) or half a prefill tile (`R` = 4).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4k_pair_avx2<const R: usize>(xs: [&[BlockQ4K]; 2], ys: [&[BlockQ8K]; R]) -> [[f32; R]; 2] {
    let m4 = _mm256_set1_epi8(0xF);
    // Lane r of each half: weight row A (low half) or B (high) against activation row r.
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = _mm256_setzero_ps();
    for i in 0..xs[0].len() {
        if R == 1 {
            prefetch_ahead(xs[0], i);
            prefetch_ahead(xs[1], i);
        }
        let (a, b) = (&xs[0][i], &xs[1][i]);
        let u = q4k_unpack_scales(_mm256_set_m128i(q4k_scale_bytes(b), q4k_scale_bytes(a)));
        // [A scales, B scales, A mins, B mins] (eight bytes each), widened to i16.
        let u = _mm256_permute4x64_epi64::<0b11_01_10_00>(u);
        let scales = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(u));
        let mins = _mm256_cvtepu8_epi16(_mm256_extracti128_si256::<1>(u));
        let mut sumi = [_mm256_setzero_si256(); 4];
        for j in 0..QK_K / 64 {
            let wa = _mm256_loadu_si256(a.qs.as_ptr().add(32 * j) as *const __m256i);
            let wb = _mm256_loadu_si256(b.qs.as_ptr().add(32 * j) as *const __m256i);
            let x0 = _mm256_permute2x128_si256::<0x20>(wa, wb);
            let x1 = _mm256_permute2x128_si256::<0x31>(wa, wb);
            let (lo0, lo1) = (_mm256_and_si256(x0, m4), _mm256_and_si256(x1, m4));
            let hi0 = _mm256_and_si256(_mm256_srli_epi16::<4>(x0), m4);
            let hi1 = _mm256_and_si256(_mm256_srli_epi16::<4>(x1), m4);
            let s_lo = _mm256_shuffle_epi8(scales, get_scale_shuffle_k4(2 * j));
            let s_hi = _mm256_shuffle_epi8(scales, get_scale_shuffle_k4(2 * j + 1));
            for r in 0..R {
                let q8 = ys[r][i].qs.as_ptr().add(64 * j);
                let y = |o: usize| _mm256_broadcastsi128_si256(_mm_loadu_si128(q8.add(o) as *const __m128i));
                let pl = _mm256_add_epi16(_mm256_maddubs_epi16(lo0, y(0)), _mm256_maddubs_epi16(lo1, y(16)));
                let ph = _mm256_add_epi16(_mm256_maddubs_epi16(hi0, y(32)), _mm256_maddubs_epi16(hi1, y(48)));
                let p = _mm256_add_epi32(_mm256_madd_epi16(pl, s_lo), _mm256_madd_epi16(ph, s_hi));
                sumi[r] = _mm256_add_epi32(sumi[r], p);
            }
        }
        // The mins' sums after the loop (not live in it: registers).
        let mut summ = [_mm256_setzero_si256(); 4];
        for r in 0..R {
            let s = q8k_sub_sums(&ys[r][i]);
            summ[r] = _mm256_madd_epi16(mins, _mm256_set_m128i(s, s));
        }
        let (xd, xdmin) = ([a.d.to_f32(), b.d.to_f32()], [a.dmin.to_f32(), b.dmin.to_f32()]);
        if R == 1 {
            // One activation row: lanes [S, M, S, M] of each half in two
            // `vphaddd`, and lane 0 of `acc` the sums' accumulator, lane 1 the mins'.
            let h = _mm256_hadd_epi32(sumi[0], summ[0]);
            let h = _mm256_hadd_epi32(h, h);
            let yd = ys[0][i].d;
            let dd = |r: usize| _mm_setr_ps(yd * xd[r], -yd * xdmin[r], 0.0, 0.0);
            acc = _mm256_fmadd_ps(_mm256_set_m128(dd(1), dd(0)), _mm256_cvtepi32_ps(h), acc);
        } else {
            let pad = |v: [__m256i; 4]| half_sums4(std::array::from_fn(|r| v[if r < R { r } else { 0 }]));
            let yd = _mm_set_ps(ys[3 % R][i].d, ys[2 % R][i].d, ys[1 % R][i].d, ys[0][i].d);
            let yd = _mm256_set_m128(yd, yd);
            let d = _mm256_mul_ps(yd, _mm256_set_m128(_mm_set1_ps(xd[1]), _mm_set1_ps(xd[0])));
            let dmin = _mm256_set_m128(_mm_set1_ps(xdmin[1]), _mm_set1_ps(xdmin[0]));
            let dmin = _mm256_mul_ps(_mm256_xor_ps(yd, _mm256_set1_ps(-0.0)), dmin);
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(pad(sumi)), acc);
            acc_m = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(pad(summ)), acc_m);
        }
    }
    let mut out = [0f32; 8];
    if R == 1 {
        _mm256_storeu_ps(out.as_mut_ptr(), acc);
        return [std::array::from_fn(|_| out[0] + out[1]), std::array::from_fn(|_| out[4] + out[5])];
    }
    _mm256_storeu_ps(out.as_mut_ptr(), _mm256_add_ps(acc, acc_m));
    [std::array::from_fn(|r| out[r]), std::array::from_fn(|r| out[4 + r])]
}

/// One Q4_K weight row against `R` (1 or 4) activation rows, the arithmetic of
/// `q4k_pair_avx2` (the rows past the last pair or group of four).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4k_row_avx2<const R: usize>(x: &[BlockQ4K], ys: [&[BlockQ8K]; R]) -> [f32; R] {
    let m4 = _mm256_set1_epi8(0xF);
    let mut acc = _mm_setzero_ps();
    let mut acc_m = _mm_setzero_ps();
    for (i, x) in x.iter().enumerate() {
        let ms = q4k_mins_and_scales_avx2(x);
        let sc = _mm256_extracti128_si256::<0>(ms);
        let scales = _mm256_set_m128i(sc, sc);
        let mins = _mm256_extracti128_si256::<1>(ms);
        let mut sumi = [_mm256_setzero_si256(); 4];
        for j in 0..QK_K / 64 {
            let bits = _mm256_loadu_si256(x.qs.as_ptr().add(32 * j) as *const __m256i);
            let lo = _mm256_and_si256(bits, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4);
            let s_lo = _mm256_shuffle_epi8(scales, get_scale_shuffle_k4(2 * j));
            let s_hi = _mm256_shuffle_epi8(scales, get_scale_shuffle_k4(2 * j + 1));
            for r in 0..R {
                let q8 = ys[r][i].qs.as_ptr().add(64 * j);
                let pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256(q8 as *const __m256i)), s_lo);
                let ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, _mm256_loadu_si256(q8.add(32) as *const __m256i)), s_hi);
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(pl, ph));
            }
        }
        let mut summ = [_mm_setzero_si128(); 4];
        for r in 0..R {
            summ[r] = _mm_madd_epi16(mins, q8k_sub_sums(&ys[r][i]));
        }
        let s = lane_sums4_avx2(std::array::from_fn(|r| sumi[r.min(R - 1)]));
        let m = std::array::from_fn::<_, 4, _>(|r| summ[if r < R { r } else { 0 }]);
        let m = _mm_hadd_epi32(_mm_hadd_epi32(m[0], m[1]), _mm_hadd_epi32(m[2], m[3]));
        let yd = _mm_set_ps(ys[3 % R][i].d, ys[2 % R][i].d, ys[1 % R][i].d, ys[0][i].d);
        let d = _mm_mul_ps(yd, _mm_set1_ps(x.d.to_f32()));
        let dmin = _mm_mul_ps(_mm_xor_ps(yd, _mm_set1_ps(-0.0)), _mm_set1_ps(x.dmin.to_f32()));
        acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(s), acc);
        acc_m = _mm_fmadd_ps(dmin, _mm_cvtepi32_ps(m), acc_m);
    }
    let mut out = [0f32; 4];
    _mm_storeu_ps(out.as_mut_ptr(), _mm_add_ps(acc, acc_m));
    std::array::from_fn(|r| out[r])
}

// cowork patch (PATCH.md, change 7): the AVX-512 VNNI Q4_K kernels (decode
// rows, single rows and prefill tiles) share one arithmetic: a block's integer
// sum (`vpmaddubsw` of nibbles and activation, `vpdpwssd` with the sub-blocks'
// scales, then summed across lanes — exact in i32) and its mins' sum (exact),
// each turned to f32 once per block and accumulated with `y.d * x.d` and
// `-y.d * x.dmin` — for eight (weight row, activation row) pairs in one
// instruction in a tile. The AVX2 kernels of change 8 (above) do the same
// float work, so a prompt's rows are bit-identical to the same rows decoded one
// at a time, and the AVX2 and AVX-512 paths give the same bits.

/// Lane `p` of the result: the sum of `v[p]`'s sixteen i32 lanes (exact).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn lane_sums4(v: [__m512i; 4]) -> __m128i {
    // Per 128-bit block: [v0, v1, v2, v3] partial sums, then the four blocks folded.
    let t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]), _mm512_unpackhi_epi32(v[0], v[1]));
    let t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]), _mm512_unpackhi_epi32(v[2], v[3]));
    let u = _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
    let h = _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64::<1>(u));
    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
}

/// Lane `p` of the result: the sum of the four i32 lanes of 128-bit block `p` of `m`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn block_sums4(m: __m512i) -> __m128i {
    let t = _mm512_add_epi32(m, _mm512_shuffle_epi32::<0b01_00_11_10>(m));
    let t = _mm512_add_epi32(t, _mm512_shuffle_epi32::<0b10_11_00_01>(t));
    _mm512_castsi512_si128(_mm512_permutexvar_epi32(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), t))
}

/// `R` (1 or 4) Q4_K weight rows against one activation row: a decode step,
/// 128 weights a step (the nibbles of two 64-weight groups in one register),
/// the activation's blocks loaded once for the rows, the rows two groups on
/// prefetched (rows are too short for the hardware prefetcher).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q4k_rows_vnni<const R: usize>(xs: [&[BlockQ4K]; R], ys: &[BlockQ8K]) -> [f32; R] {
    let m4 = _mm512_set1_epi8(0xF);
    // (Macros, not closures: a closure does not inherit the function's target features.)
    macro_rules! halves {
        ($lo:expr, $hi:expr) => {
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512($lo), $hi)
        };
    }
    // The scales' i16 lanes for step t: low nibbles are sub-blocks 4t and 4t + 2, high ones 4t + 1 and 4t + 3.
    macro_rules! pair {
        ($a:expr, $b:expr) => {
            halves!(_mm256_set1_epi16($a), _mm256_set1_epi16($b))
        };
    }
    let scale_lo = [pair!(0, 2), pair!(4, 6)];
    let scale_hi = [pair!(1, 3), pair!(5, 7)];
    let mut acc = _mm_setzero_ps();
    let mut acc_m = _mm_setzero_ps();
    let ahead = 8 * std::mem::size_of_val(xs[0]);
    for (i, y) in ys.iter().enumerate() {
        let q8 = y.qs.as_ptr();
        macro_rules! load2 {
            ($a:expr, $b:expr) => {
                halves!(_mm256_loadu_si256(q8.add($a) as *const __m256i), _mm256_loadu_si256(q8.add($b) as *const __m256i))
            };
        }
        // The activation bytes each nibble half of step t meets.
        let q8_lo = [load2!(0, 64), load2!(128, 192)];
        let q8_hi = [load2!(32, 96), load2!(160, 224)];
        let q8sums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
        let q8s = _mm_hadd_epi16(_mm256_extracti128_si256::<0>(q8sums), _mm256_extracti128_si256::<1>(q8sums));
        let mut sumi = [_mm512_setzero_si512(); 4];
        let mut mins = [_mm_setzero_si128(); 4];
        let mut xd = [0f32; 4];
        let mut xdmin = [0f32; 4];
        for r in 0..R {
            let next = (xs[r].as_ptr().add(i) as *const i8).wrapping_add(ahead);
            for line in 0..3 {
                _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(64 * line));
            }
            let x = &xs[r][i];
            xd[r] = x.d.to_f32();
            xdmin[r] = x.dmin.to_f32();
            let mins_and_scales = q4k_mins_and_scales_avx2(x);
            mins[r] = _mm_madd_epi16(_mm256_extracti128_si256::<1>(mins_and_scales), q8s);
            // The eight scales in i16 lanes 0..7 (the permutes read no other lane).
            let scales = _mm512_castsi256_si512(mins_and_scales);
            let q4 = x.qs.as_ptr();
            for t in 0..2 {
                let bits = _mm512_loadu_si512(q4.add(64 * t) as *const _);
                let lo = _mm512_and_si512(bits, m4);
                let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(bits), m4);
                let s_lo = _mm512_permutexvar_epi16(scale_lo[t], scales);
                let s_hi = _mm512_permutexvar_epi16(scale_hi[t], scales);
                sumi[r] = dpwssd!(sumi[r], _mm512_maddubs_epi16(lo, q8_lo[t]), s_lo);
                sumi[r] = dpwssd!(sumi[r], _mm512_maddubs_epi16(hi, q8_hi[t]), s_hi);
            }
        }
        let sums = _mm_cvtepi32_ps(lane_sums4(sumi));
        let m = _mm_hadd_epi32(_mm_hadd_epi32(mins[0], mins[1]), _mm_hadd_epi32(mins[2], mins[3]));
        let yd = _mm_set1_ps(y.d);
        let d = _mm_mul_ps(yd, _mm_loadu_ps(xd.as_ptr()));
        let dmin = _mm_mul_ps(_mm_set1_ps(-y.d), _mm_loadu_ps(xdmin.as_ptr()));
        acc = _mm_fmadd_ps(d, sums, acc);
        acc_m = _mm_fmadd_ps(dmin, _mm_cvtepi32_ps(m), acc_m);
    }
    let mut out = [0f32; 4];
    _mm_storeu_ps(out.as_mut_ptr(), _mm_add_ps(acc, acc_m));
    std::array::from_fn(|r| out[r])
}

/// `C` (1, 2 or 4) Q4_K weight rows against four activation rows (a prefill
/// tile): each weight block's scales, mins and nibbles unpacked once for the
/// four activation rows, each activation block loaded once for the `C` weight
/// rows, and the block's float work for the `4 C` outputs in one instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q4k_tile_vnni<const C: usize>(xs: [&[BlockQ4K]; C], ys: [&[BlockQ8K]; 4]) -> [[f32; 4]; C] {
    let m4 = _mm512_set1_epi8(0xF);
    macro_rules! halves {
        ($lo:expr, $hi:expr) => {
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512($lo), $hi)
        };
    }
    macro_rules! pair {
        ($a:expr, $b:expr) => {
            halves!(_mm256_set1_epi16($a), _mm256_set1_epi16($b))
        };
    }
    let scale_lo = [pair!(0, 2), pair!(4, 6)];
    let scale_hi = [pair!(1, 3), pair!(5, 7)];
    // Lane r of acc[c]: weight row c against activation row r.
    let mut acc = [_mm_setzero_ps(); C];
    let mut acc_m = [_mm_setzero_ps(); C];
    for i in 0..ys[0].len() {
        let y = [&ys[0][i], &ys[1][i], &ys[2][i], &ys[3][i]];
        // The activation rows' pair sums of bsums, one row per 128-bit block.
        let mut q8s = _mm512_setzero_si512();
        for r in 0..4 {
            let q8sums = _mm256_loadu_si256(y[r].bsums.as_ptr() as *const __m256i);
            let s = _mm_hadd_epi16(_mm256_extracti128_si256::<0>(q8sums), _mm256_extracti128_si256::<1>(q8sums));
            q8s = _mm512_mask_broadcast_i32x4(q8s, 0xF << (4 * r), s);
        }
        let yd = _mm_set_ps(y[3].d, y[2].d, y[1].d, y[0].d);
        let mut scales = [_mm512_setzero_si512(); C];
        let mut mins = [_mm512_setzero_si512(); C];
        for c in 0..C {
            let mins_and_scales = q4k_mins_and_scales_avx2(&xs[c][i]);
            mins[c] = _mm512_madd_epi16(_mm512_broadcast_i32x4(_mm256_extracti128_si256::<1>(mins_and_scales)), q8s);
            scales[c] = _mm512_castsi256_si512(mins_and_scales);
        }
        let mut sumi = [[_mm512_setzero_si512(); 4]; C];
        // A step of 128 weights, one nibble half at a time (low: sub-blocks 4t
        // and 4t + 2, high: 4t + 1 and 4t + 3), so four weight rows' values,
        // scales and sums stay in registers.
        for t in 0..2 {
            for high in [false, true] {
                let mut w = [_mm512_setzero_si512(); C];
                let mut sc = [_mm512_setzero_si512(); C];
                for c in 0..C {
                    let bits = _mm512_loadu_si512(xs[c][i].qs.as_ptr().add(64 * t) as *const _);
                    let bits = if high { _mm512_srli_epi16::<4>(bits) } else { bits };
                    w[c] = _mm512_and_si512(bits, m4);
                    sc[c] = _mm512_permutexvar_epi16(if high { scale_hi[t] } else { scale_lo[t] }, scales[c]);
                }
                for r in 0..4 {
                    let q8 = y[r].qs.as_ptr().add(128 * t + if high { 32 } else { 0 });
                    let q8v = halves!(_mm256_loadu_si256(q8 as *const __m256i), _mm256_loadu_si256(q8.add(64) as *const __m256i));
                    for c in 0..C {
                        sumi[c][r] = dpwssd!(sumi[c][r], _mm512_maddubs_epi16(w[c], q8v), sc[c]);
                    }
                }
            }
        }
        for c in 0..C {
            let x = &xs[c][i];
            let d = _mm_mul_ps(yd, _mm_set1_ps(x.d.to_f32()));
            let dmin = _mm_mul_ps(_mm_xor_ps(yd, _mm_set1_ps(-0.0)), _mm_set1_ps(x.dmin.to_f32()));
            acc[c] = _mm_fmadd_ps(d, _mm_cvtepi32_ps(lane_sums4(sumi[c])), acc[c]);
            acc_m[c] = _mm_fmadd_ps(dmin, _mm_cvtepi32_ps(block_sums4(mins[c])), acc_m[c]);
        }
    }
    let mut out = [[0f32; 4]; C];
    for c in 0..C {
        _mm_storeu_ps(out[c].as_mut_ptr(), _mm_add_ps(acc[c], acc_m[c]));
    }
    out
}

#[inline(always)]
pub(crate) fn vec_dot_q5k_q8k(n: usize, xs: &[BlockQ5K], ys: &[BlockQ8K]) -> f32 {
    debug_assert!(
        n.is_multiple_of(QK_K),
        "vec_dot_q5k_q8k: {n} is not divisible by {QK_K}"
    );
    let mut utmp = [0u32; 4];
    const KMASK1: u32 = 0x3f3f3f3f;
    const KMASK2: u32 = 0x0f0f0f0f;
    const KMASK3: u32 = 0x03030303;

    unsafe {
        let m4 = _mm256_set1_epi8(0xF);
        let mzero = _mm_setzero_si128();
        let mone = _mm256_set1_epi8(1);

        let mut acc = _mm256_setzero_ps();
        let mut summs = 0.0;

        for (x, y) in xs.iter().zip(ys.iter()) {
            let d = y.d * x.d.to_f32();
            let dmin = -y.d * x.dmin.to_f32();

            LittleEndian::read_u32_into(&x.scales, &mut utmp[0..3]);

            utmp[3] = ((utmp[2] >> 4) & KMASK2) | (((utmp[1] >> 6) & KMASK3) << 4);
            let uaux = utmp[1] & KMASK1;
            utmp[1] = (utmp[2] & KMASK2) | (((utmp[0] >> 6) & KMASK3) << 4);
            utmp[2] = uaux;
            utmp[0] &= KMASK1;

            let mut q5 = x.qs.as_ptr();
            let mut q8 = y.qs.as_ptr();

            let mins_and_scales = _mm256_cvtepu8_epi16(_mm_set_epi32(
                utmp[3] as i32,
                utmp[2] as i32,
                utmp[1] as i32,
                utmp[0] as i32,
            ));

            let q8sums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
            let q8s = _mm_hadd_epi16(
                _mm256_extracti128_si256(q8sums, 0),
                _mm256_extracti128_si256(q8sums, 1),
            );
            let prod = _mm_madd_epi16(_mm256_extracti128_si256(mins_and_scales, 1), q8s);
            let hsum = _mm_hadd_epi32(_mm_hadd_epi32(prod, mzero), mzero);
            summs += dmin * _mm_extract_epi32(hsum, 0) as f32;

            let sc128 = _mm256_extracti128_si256(mins_and_scales, 0);
            let scales = mm256_set_m128i(sc128, sc128);

            let hbits = _mm256_loadu_si256(x.qh.as_ptr() as *const __m256i);
            let mut hmask = mone;

            let mut sumi = _mm256_setzero_si256();

            for j in 0..QK_K / 64 {
                let scale_0 = _mm256_shuffle_epi8(scales, get_scale_shuffle_k4(2 * j));
                let scale_1 = _mm256_shuffle_epi8(scales, get_scale_shuffle_k4(2 * j + 1));

                let q5bits = _mm256_loadu_si256(q5 as *const __m256i);
                q5 = q5.add(32);

                //Similar to q3k we hardcode the shifts here to avoid loading them into a separate register
                let q5l_0 = _mm256_and_si256(q5bits, m4);
                let q5l_0_shift_input = _mm256_and_si256(hbits, hmask);
                let q5l_0_right_shift = match j {
                    0 => _mm256_srli_epi16(q5l_0_shift_input, 0),
                    1 => _mm256_srli_epi16(q5l_0_shift_input, 2),
                    2 => _mm256_srli_epi16(q5l_0_shift_input, 4),
                    3 => _mm256_srli_epi16(q5l_0_shift_input, 6),
                    _ => unreachable!(),
                };
                let q5h_0 = _mm256_slli_epi16(q5l_0_right_shift, 4);
                let q5_0 = _mm256_add_epi8(q5l_0, q5h_0);
                hmask = _mm256_slli_epi16(hmask, 1);

                let q5l_1 = _mm256_and_si256(_mm256_srli_epi16(q5bits, 4), m4);
                let q5l_1_shift_input = _mm256_and_si256(hbits, hmask);
                let q5l_1_right_shift = match j {
                    0 => _mm256_srli_epi16(q5l_1_shift_input, 1),
                    1 => _mm256_srli_epi16(q5l_1_shift_input, 3),
                    2 => _mm256_srli_epi16(q5l_1_shift_input, 5),
                    3 => _mm256_srli_epi16(q5l_1_shift_input, 7),
                    _ => unreachable!(),
                };

                let q5h_1 = _mm256_slli_epi16(q5l_1_right_shift, 4);
                let q5_1 = _mm256_add_epi8(q5l_1, q5h_1);
                hmask = _mm256_slli_epi16(hmask, 1);

                let q8_0 = _mm256_loadu_si256(q8 as *const __m256i);
                q8 = q8.add(32);
                let q8_1 = _mm256_loadu_si256(q8 as *const __m256i);
                q8 = q8.add(32);

                let p16_0 = _mm256_maddubs_epi16(q5_0, q8_0);
                let p16_1 = _mm256_maddubs_epi16(q5_1, q8_1);

                let p16_0 = _mm256_madd_epi16(scale_0, p16_0);
                let p16_1 = _mm256_madd_epi16(scale_1, p16_1);

                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16_0, p16_1));
            }
            let vd = _mm256_set1_ps(d);
            acc = _mm256_fmadd_ps(vd, _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_float_8(acc) + summs
    }
}

#[inline(always)]
pub(crate) fn vec_dot_q8k_q8k(n: usize, xs: &[BlockQ8K], ys: &[BlockQ8K]) -> f32 {
    debug_assert!(
        n.is_multiple_of(QK_K),
        "vec_dot_q8k_8k: {n} is not divisible by {QK_K}"
    );
    unsafe {
        let mut acc = _mm256_setzero_ps();
        for (xs, ys) in xs.iter().zip(ys.iter()) {
            let mut sumi = _mm256_setzero_si256();
            let x_qs = xs.qs.as_ptr();
            let y_qs = ys.qs.as_ptr();
            for j in (0..QK_K).step_by(32) {
                let xs = _mm256_loadu_si256(x_qs.add(j) as *const __m256i);
                let ys = _mm256_loadu_si256(y_qs.add(j) as *const __m256i);

                let xs0 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(xs, 0));
                let ys0 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(ys, 0));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(xs0, ys0));

                let xs1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(xs, 1));
                let ys1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(ys, 1));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(xs1, ys1));
            }
            let d = _mm256_set1_ps(xs.d * ys.d);
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_float_8(acc)
    }
}

/// cowork patch (PATCH.md, change 7): `BlockQ8K::from_float` (a prompt's
/// activations, before every quantized matmul) in AVX2: the same values as the
/// scalar loop — the first element of largest magnitude sets the scale, and
/// rounding is half away from zero (`f32::round`), done as truncation plus a
/// step where the exact remainder is at least one half.
#[inline(always)]
pub(crate) fn quantize_row_q8k(xs: &[f32], ys: &mut [BlockQ8K]) {
    debug_assert!(xs.len() == ys.len() * QK_K);
    unsafe {
        let sign = _mm256_set1_ps(-0.0);
        let half = _mm256_set1_ps(0.5);
        let one = _mm256_set1_ps(1.0);
        let top = _mm256_set1_ps(127.0);
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for (xs, y) in xs.chunks_exact(QK_K).zip(ys.iter_mut()) {
            let mut amax = _mm256_setzero_ps();
            for v in xs.chunks_exact(8) {
                // (The running maximum second: `vmaxps` returns it where the element is NaN, as the scalar loop skips NaN.)
                amax = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(v.as_ptr())), amax);
            }
            let amax = hmax_float_8(amax);
            if !(amax > 0f32) {
                // All zero (or NaN, which the scalar loop also leaves at zero).
                y.d = 0f32;
                y.qs.fill(0);
                y.bsums.fill(0);
                continue;
            }
            let max = xs.iter().copied().find(|x| x.abs() == amax).unwrap_or(amax);
            let iscale = -128f32 / max;
            let vscale = _mm256_set1_ps(iscale);
            let round = |i: usize| {
                let v = _mm256_mul_ps(vscale, _mm256_loadu_ps(xs.as_ptr().add(i)));
                let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(v);
                let rem = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
                let step = _mm256_and_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(rem, half), _mm256_or_ps(one, _mm256_and_ps(sign, v)));
                _mm256_cvtps_epi32(_mm256_min_ps(_mm256_add_ps(t, step), top))
            };
            for i in (0..QK_K).step_by(32) {
                let ab = _mm256_packs_epi32(round(i), round(i + 8));
                let cd = _mm256_packs_epi32(round(i + 16), round(i + 24));
                let q = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), order);
                _mm256_storeu_si256(y.qs.as_mut_ptr().add(i) as *mut __m256i, q);
            }
            for (j, sum) in y.bsums.iter_mut().enumerate() {
                *sum = y.qs[16 * j..16 * (j + 1)].iter().map(|&q| q as i16).sum();
            }
            y.d = 1.0 / iscale;
        }
    }
}

#[inline(always)]
unsafe fn hmax_float_8(x: __m256) -> f32 {
    let m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps::<1>(x));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let m = _mm_max_ss(m, _mm_movehdup_ps(m));
    _mm_cvtss_f32(m)
}
