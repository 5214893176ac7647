//! The quantized matmul of a prompt's prefill (candle-core, patched: see
//! src/vendor/candle-core/PATCH.md) at Qwen2.5-0.5B's shapes: 256 prompt rows
//! through an FFN gate/up projection (896 → 4,864, Q8_0 as cowork installs it)
//! and the down projection (4,864 → 896, Q4_K and Q6_K as the file has it).
//! Throughput is in multiply-adds; `COWORK_BENCH_ROWS` sets the prompt rows
//! (1,844: the long prompt of scripts/measure). `decode_gemv` is one decode
//! step's product at Qwen2.5-1.5B's FFN shapes (1,536 → 8,960 in Q4_K, and
//! 8,960 → 1,536 in Q6_K) and at Qwen2.5-0.5B's (896 → 4,864 in Q8_0), in
//! bytes of weights streamed; with
//! `CANDLE_NO_AVX512=1` it runs the AVX2 kernels on a CPU with AVX-512 VNNI,
//! for the side by side. Run with `cargo bench --profile dev --bench kernels`.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect()
}

fn prefill_matmul(c: &mut Criterion) {
    let m: usize = std::env::var("COWORK_BENCH_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(256);
    let mut group = c.benchmark_group("prefill_matmul");
    group.sample_size(10);
    for (name, dtype, k, n) in [
        ("q8_0_896x4864", GgmlDType::Q8_0, 896, 4864),
        ("q4k_4864x896", GgmlDType::Q4K, 4864, 896),
        ("q6k_4864x896", GgmlDType::Q6K, 4864, 896),
    ] {
        let w = Tensor::from_vec(values(n * k, 1), (n, k), &Device::Cpu).unwrap();
        let q = QMatMul::from_qtensor(QTensor::quantize(&w, dtype).unwrap()).unwrap();
        let x = Tensor::from_vec(values(m * k, 2), (m, k), &Device::Cpu).unwrap();
        group.throughput(Throughput::Elements((m * k * n) as u64));
        group.bench_function(name, |b| b.iter(|| q.forward(&x).unwrap()));
    }
    group.finish();
}

fn decode_gemv(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode_gemv");
    for (name, dtype, k, n, bytes_per_256) in [
        ("q4k_1536x8960", GgmlDType::Q4K, 1536, 8960, 144),
        ("q6k_8960x1536", GgmlDType::Q6K, 8960, 1536, 210),
        ("q8_0_896x4864", GgmlDType::Q8_0, 896, 4864, 272),
    ] {
        let w = Tensor::from_vec(values(n * k, 1), (n, k), &Device::Cpu).unwrap();
        let q = QMatMul::from_qtensor(QTensor::quantize(&w, dtype).unwrap()).unwrap();
        let x = Tensor::from_vec(values(k, 2), (1, k), &Device::Cpu).unwrap();
        group.throughput(Throughput::Bytes((n * k / 256 * bytes_per_256) as u64));
        group.bench_function(name, |b| b.iter(|| q.forward(&x).unwrap()));
    }
    group.finish();
}

criterion_group!(benches, prefill_matmul, decode_gemv);
criterion_main!(benches);
