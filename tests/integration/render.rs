//! A software renderer for egui's meshes, so the kittest harness can draw the
//! sidebar to PNG on a machine without a GPU (and give the same pixels on
//! every machine). It paints as egui_glow does: in gamma space, premultiplied
//! alpha, textures sampled bilinearly.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use egui::epaint::{ImageData, Primitive, Vertex};
use egui::{ColorImage, TextureId};

/// Keeps the textures egui uploads; clone it before handing it to the
/// harness, and draw with the clone.
#[derive(Clone, Default)]
pub struct SoftRenderer {
    textures: Rc<RefCell<HashMap<TextureId, ColorImage>>>,
}

impl egui_kittest::TestRenderer for SoftRenderer {
    fn handle_delta(&mut self, delta: &mut egui::TexturesDelta) {
        let mut textures = self.textures.borrow_mut();
        for (id, deltas) in delta.set.drain() {
            for image_delta in &deltas {
                let ImageData::Color(image) = &image_delta.image;
                match image_delta.pos {
                    None => {
                        textures.insert(id, (**image).clone());
                    }
                    Some([x0, y0]) => {
                        let Some(texture) = textures.get_mut(&id) else { continue };
                        let width = texture.size[0];
                        for y in 0..image.size[1] {
                            let row = &image.pixels[y * image.size[0]..(y + 1) * image.size[0]];
                            texture.pixels[(y0 + y) * width + x0..(y0 + y) * width + x0 + row.len()].copy_from_slice(row);
                        }
                    }
                }
            }
        }
        for id in delta.free.drain() {
            textures.remove(&id);
        }
    }
}

impl SoftRenderer {
    /// The last frame the harness ran, as an image of `size_points` at the frame's scale.
    pub fn render(&self, ctx: &egui::Context, output: &egui::FullOutput, size_points: egui::Vec2) -> ColorImage {
        let ppp = output.pixels_per_point;
        let (width, height) = ((size_points.x * ppp).round() as usize, (size_points.y * ppp).round() as usize);
        let background = ctx.global_style().visuals.panel_fill;
        let mut canvas = vec![[background.r() as f32, background.g() as f32, background.b() as f32, 255.0]; width * height];
        let textures = self.textures.borrow();
        for clipped in ctx.tessellate(output.shapes.clone(), ppp) {
            let Primitive::Mesh(mesh) = clipped.primitive else { continue };
            let texture = textures.get(&mesh.texture_id);
            let clip = [
                (clipped.clip_rect.min.x * ppp).max(0.0),
                (clipped.clip_rect.min.y * ppp).max(0.0),
                (clipped.clip_rect.max.x * ppp).min(width as f32),
                (clipped.clip_rect.max.y * ppp).min(height as f32),
            ];
            for triangle in mesh.indices.chunks_exact(3) {
                let [a, b, c] = [0, 1, 2].map(|i| &mesh.vertices[triangle[i] as usize]);
                fill_triangle(&mut canvas, width, clip, ppp, [a, b, c], texture);
            }
        }
        let pixels = canvas.iter().map(|p| egui::Color32::from_rgba_premultiplied(p[0] as u8, p[1] as u8, p[2] as u8, p[3] as u8)).collect();
        ColorImage::new([width, height], pixels)
    }
}

fn fill_triangle(canvas: &mut [[f32; 4]], width: usize, clip: [f32; 4], ppp: f32, v: [&Vertex; 3], texture: Option<&ColorImage>) {
    let p = v.map(|v| (v.pos.x * ppp, v.pos.y * ppp));
    let area = (p[1].0 - p[0].0) * (p[2].1 - p[0].1) - (p[2].0 - p[0].0) * (p[1].1 - p[0].1);
    if area.abs() < 1e-6 {
        return;
    }
    let x0 = p.iter().map(|p| p.0).fold(f32::MAX, f32::min).max(clip[0]).floor() as usize;
    let x1 = p.iter().map(|p| p.0).fold(f32::MIN, f32::max).min(clip[2]).ceil() as usize;
    let y0 = p.iter().map(|p| p.1).fold(f32::MAX, f32::min).max(clip[1]).floor() as usize;
    let y1 = p.iter().map(|p| p.1).fold(f32::MIN, f32::max).min(clip[3]).ceil() as usize;
    let colour = v.map(|v| v.color.to_array().map(f32::from));
    for y in y0..y1 {
        let py = y as f32 + 0.5;
        if py < clip[1] || py > clip[3] {
            continue;
        }
        for x in x0..x1 {
            let px = x as f32 + 0.5;
            if px < clip[0] || px > clip[2] {
                continue;
            }
            // Barycentric weights; either winding (egui uses both).
            let w0 = ((p[1].0 - px) * (p[2].1 - py) - (p[2].0 - px) * (p[1].1 - py)) / area;
            let w1 = ((p[2].0 - px) * (p[0].1 - py) - (p[0].0 - px) * (p[2].1 - py)) / area;
            let w2 = 1.0 - w0 - w1;
            if w0 < 0.0 || w1 < 0.0 || w2 < 0.0 {
                continue;
            }
            let mut src = [0.0f32; 4];
            for (i, channel) in src.iter_mut().enumerate() {
                *channel = (w0 * colour[0][i] + w1 * colour[1][i] + w2 * colour[2][i]) / 255.0;
            }
            if let Some(texture) = texture {
                let u = w0 * v[0].uv.x + w1 * v[1].uv.x + w2 * v[2].uv.x;
                let t = w0 * v[0].uv.y + w1 * v[1].uv.y + w2 * v[2].uv.y;
                let texel = sample(texture, u, t);
                for (channel, texel) in src.iter_mut().zip(texel) {
                    *channel *= texel;
                }
            }
            let dst = &mut canvas[y * width + x];
            for i in 0..4 {
                dst[i] = src[i] * 255.0 + dst[i] * (1.0 - src[3]);
            }
        }
    }
}

/// Bilinear sample at normalised (u, v), as 0..1 premultiplied channels.
fn sample(texture: &ColorImage, u: f32, v: f32) -> [f32; 4] {
    let [w, h] = texture.size;
    let x = (u * w as f32 - 0.5).clamp(0.0, (w - 1) as f32);
    let y = (v * h as f32 - 0.5).clamp(0.0, (h - 1) as f32);
    let (xi, yi) = (x.floor() as usize, y.floor() as usize);
    let (fx, fy) = (x - xi as f32, y - yi as f32);
    let (xj, yj) = ((xi + 1).min(w - 1), (yi + 1).min(h - 1));
    let at = |x: usize, y: usize| texture.pixels[y * w + x].to_array().map(|c| f32::from(c) / 255.0);
    let (a, b, c, d) = (at(xi, yi), at(xj, yi), at(xi, yj), at(xj, yj));
    let mut out = [0.0; 4];
    for i in 0..4 {
        out[i] = (a[i] * (1.0 - fx) + b[i] * fx) * (1.0 - fy) + (c[i] * (1.0 - fx) + d[i] * fx) * fy;
    }
    out
}

/// Writes `image` as an RGBA PNG.
pub fn write_png(path: &std::path::Path, image: &ColorImage) {
    let file = std::fs::File::create(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), image.size[0] as u32, image.size[1] as u32);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Best);
    encoder.write_header().and_then(|mut w| w.write_image_data(image.as_raw())).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
