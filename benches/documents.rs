//! Reading and writing documents (issue 44): pages per second of a 300-page
//! PDF, a 100-page Word document, rows per second of a 20,000-row workbook,
//! and writing that workbook. The PDF is written here (Helvetica text, one
//! content stream per page), so the bench needs nothing installed;
//! `scripts/measure-documents` measures LibreOffice-made files, memory,
//! time to searchable and the Python peers side by side.

use std::io::Write;
use std::path::Path;

use cowork::documents::write::{Sheet, write};
use cowork::documents::{Selection, read};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;

/// A PDF of `pages` pages, each with `lines` lines of text.
pub fn text_pdf(path: &Path, pages: usize, lines: usize) {
    let mut out: Vec<u8> = b"%PDF-1.4\n".to_vec();
    let mut offsets: Vec<usize> = Vec::new();
    let object = |out: &mut Vec<u8>, offsets: &mut Vec<usize>, body: &[u8]| {
        offsets.push(out.len());
        let n = offsets.len();
        out.extend_from_slice(format!("{n} 0 obj\n").as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    };
    // 1: catalog, 2: pages, 3: font, then per page: page, content.
    let kids: Vec<String> = (0..pages).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
    object(&mut out, &mut offsets, b"<< /Type /Catalog /Pages 2 0 R >>");
    object(&mut out, &mut offsets, format!("<< /Type /Pages /Kids [{}] /Count {pages} >>", kids.join(" ")).as_bytes());
    object(&mut out, &mut offsets, b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>");
    for page in 0..pages {
        let mut stream = String::from("BT /F1 11 Tf 14 TL 56 780 Td\n");
        for line in 0..lines {
            stream.push_str(&format!("(Page {} line {line}: the quarterly budget review for team {line} and its travel costs.) '\n", page + 1));
        }
        stream.push_str("ET");
        let content = 5 + 2 * page;
        object(&mut out, &mut offsets, format!("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> /Contents {content} 0 R >>").as_bytes());
        object(&mut out, &mut offsets, format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", offsets.len() + 1).as_bytes());
    for offset in &offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", offsets.len() + 1).as_bytes());
    std::fs::File::create(path).unwrap().write_all(&out).unwrap();
}

fn rows(n: usize) -> Vec<Vec<serde_json::Value>> {
    let mut rows = vec![vec![json!("Date"), json!("Team"), json!("Item"), json!("Amount"), json!("Approved")]];
    rows.extend((0..n).map(|i| vec![json!(format!("2026-{:02}-{:02}", i % 12 + 1, i % 28 + 1)), json!(format!("team {}", i % 40)), json!(format!("travel and hotel {i}")), json!(i as f64 * 1.25), json!(i % 3 == 0)]));
    rows
}

fn documents(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let pdf = dir.path().join("report.pdf");
    text_pdf(&pdf, 300, 40);
    let mut group = c.benchmark_group("read_document");
    group.sample_size(10);
    group.throughput(Throughput::Elements(300));
    group.bench_function("pdf_300_pages", |b| b.iter(|| assert_eq!(read(&pdf, &Selection::default()).unwrap().parts.len(), 300)));
    group.bench_function("pdf_300_pages_render_24k_chars", |b| b.iter(|| read(&pdf, &Selection::default()).unwrap().render(24_000)));

    let docx = dir.path().join("report.docx");
    let text: String = (0..100).map(|p| format!("# Chapter {p}\n\n{}\n<!-- pagebreak -->\n", "The quarterly budget review and its travel costs. ".repeat(60))).collect();
    write(&docx, Some(&text), &[]).unwrap();
    group.throughput(Throughput::Elements(100));
    group.bench_function("docx_100_pages", |b| b.iter(|| read(&docx, &Selection::default()).unwrap()));

    let xlsx = dir.path().join("ledger.xlsx");
    let sheet = Sheet { name: "Ledger".into(), rows: rows(20_000), as_text: Default::default() };
    write(&xlsx, None, std::slice::from_ref(&sheet)).unwrap();
    group.throughput(Throughput::Elements(20_000));
    group.bench_function("xlsx_20k_rows", |b| b.iter(|| read(&xlsx, &Selection::default()).unwrap()));
    group.bench_function("xlsx_20k_rows_one_range", |b| b.iter(|| read(&xlsx, &Selection { cells: Some("A100:E200".into()), ..Selection::default() }).unwrap()));
    group.finish();

    let mut group = c.benchmark_group("write_document");
    group.sample_size(10);
    group.throughput(Throughput::Elements(20_000));
    let out = dir.path().join("out.xlsx");
    group.bench_function("xlsx_20k_rows", |b| {
        b.iter(|| {
            let _ = std::fs::remove_file(&out);
            write(&out, None, std::slice::from_ref(&sheet)).unwrap()
        })
    });
    group.throughput(Throughput::Elements(100));
    let out = dir.path().join("out.docx");
    group.bench_function("docx_100_pages", |b| {
        b.iter(|| {
            let _ = std::fs::remove_file(&out);
            write(&out, Some(&text), &[]).unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, documents);
criterion_main!(benches);
