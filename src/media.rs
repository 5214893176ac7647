//! Images a tool returned (an MCP server's `image` content, an embedded image
//! resource): kept whole in cowork.db with their call (`operation_call_images`,
//! migration 11; the UI gets them in `ToolCallView::images`), and decoded once
//! into a small RGBA thumbnail on the thread that got them (the agent, or the
//! store when a chat is opened again) — never on the UI thread, which only
//! uploads the thumbnail as a texture. Decoding is bounded: a file over
//! `MAX_IMAGE_BYTES` or a picture over `MAX_SIDE` pixels a side is named, not
//! decoded, so a hostile server cannot make cowork allocate gigabytes.

use std::sync::Arc;

/// The largest encoded image cowork keeps (bigger ones are named in the result only).
pub const MAX_IMAGE_BYTES: usize = 16 * 1024 * 1024;
/// The largest picture side cowork decodes.
const MAX_SIDE: u32 = 8192;
/// Thumbnails fit in this square (the sidebar is narrow).
pub const THUMBNAIL_SIDE: u32 = 480;

/// An encoded image, as a tool returned it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub mime: String,
    pub data: Vec<u8>,
}

impl Image {
    /// `data` with its type read from its first bytes (PNG, JPEG, GIF, WebP); None for anything else or too large.
    pub fn sniffed(data: Vec<u8>) -> Option<Image> {
        let mime = sniff(&data)?;
        (data.len() <= MAX_IMAGE_BYTES).then(|| Image { mime: mime.to_owned(), data })
    }
}

/// A picture's type by its first bytes (what it is, not what a sender claimed).
pub fn sniff(data: &[u8]) -> Option<&'static str> {
    Some(match data {
        [0x89, b'P', b'N', b'G', ..] => "image/png",
        [0xFF, 0xD8, 0xFF, ..] => "image/jpeg",
        [b'G', b'I', b'F', b'8', ..] => "image/gif",
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => "image/webp",
        _ => return None,
    })
}

/// Decoded pixels, RGBA, row by row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thumbnail {
    pub width: u32,
    pub height: u32,
    pub rgba: Vec<u8>,
}

/// An image with its thumbnail, or why it cannot be shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attached {
    pub image: Image,
    pub shown: Result<Thumbnail, String>,
}

impl Attached {
    /// Decodes `image` into its thumbnail (or the reason it cannot be shown).
    pub fn new(image: Image) -> Arc<Attached> {
        let shown = thumbnail(&image.data, THUMBNAIL_SIDE);
        Arc::new(Attached { image, shown })
    }
}

/// The image scaled to fit a `side`-pixel square (never enlarged).
pub fn thumbnail(data: &[u8], side: u32) -> Result<Thumbnail, String> {
    let picture = decode(data)?;
    let picture = if picture.width() > side || picture.height() > side { picture.thumbnail(side, side) } else { picture };
    let rgba = picture.to_rgba8();
    Ok(Thumbnail { width: rgba.width(), height: rgba.height(), rgba: rgba.into_raw() })
}

/// The picture in `data` (PNG, JPEG, GIF or WebP), decoded within the bounds
/// above, or why not.
pub fn decode(data: &[u8]) -> Result<image::DynamicImage, String> {
    if data.len() > MAX_IMAGE_BYTES {
        return Err(format!("too large to show ({} MB)", data.len() >> 20));
    }
    let mut reader = image::ImageReader::new(std::io::Cursor::new(data)).with_guessed_format().map_err(|err| format!("unreadable image: {err}"))?;
    if reader.format().is_none() {
        return Err("not an image cowork can show (PNG, JPEG, GIF or WebP)".into());
    }
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(512 * 1024 * 1024);
    reader.limits(limits);
    reader.decode().map_err(|err| format!("the image could not be decoded: {err}"))
}

/// "12 B", "3.4 KB", "1.2 MB", "2.3 GB".
pub fn human_bytes(bytes: u64) -> String {
    const KB: f64 = 1024.0;
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{:.1} KB", b as f64 / KB),
        b if b < 1024 * 1024 * 1024 => format!("{:.1} MB", b as f64 / KB / KB),
        b => format!("{:.1} GB", b as f64 / KB / KB / KB),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut out = Vec::new();
        let pixels = image::RgbaImage::from_pixel(width, height, image::Rgba([200, 10, 10, 255]));
        image::DynamicImage::ImageRgba8(pixels).write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png).unwrap();
        out
    }

    #[test]
    fn a_large_picture_becomes_a_thumbnail_and_a_small_one_stays_its_size() {
        let big = thumbnail(&png(1200, 600), 480).unwrap();
        assert_eq!((big.width, big.height, big.rgba.len()), (480, 240, 480 * 240 * 4));
        assert_eq!(&big.rgba[..4], &[200, 10, 10, 255]);
        let small = thumbnail(&png(16, 8), 480).unwrap();
        assert_eq!((small.width, small.height), (16, 8));
    }

    #[test]
    fn garbage_and_oversized_pictures_are_named_not_decoded() {
        assert!(thumbnail(b"hello world!", 480).unwrap_err().contains("not an image"), "plain text");
        let mut cut = png(64, 64);
        cut.truncate(cut.len() / 2);
        assert!(thumbnail(&cut, 480).unwrap_err().contains("could not be decoded"));
        // A PNG header claiming 100000 × 100000 pixels: refused before any allocation.
        let mut huge = png(1, 1);
        huge[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        huge[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        assert!(thumbnail(&huge, 480).is_err());
        assert!(thumbnail(&vec![0u8; MAX_IMAGE_BYTES + 1], 480).unwrap_err().contains("too large"));
    }
}
