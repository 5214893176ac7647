//! Pictures in documents, read for their text by OCR (`crate::ocr`): an
//! attached PNG, JPEG, GIF or WebP, and the pictures of PDF pages that have
//! no text layer (a scan, a photo of a page). Runs on the document's thread,
//! with one Tesseract engine per document, made at the first picture.
//!
//! PDF pictures are decoded here: JPEG (DCTDecode) by `image` within
//! `media`'s bounds; Flate-compressed and plain samples (grey, RGB, CMYK; 1,
//! 8 or 16 bits; PNG predictors) by hand, inflated to at most the size their
//! dictionary gives, so a picture cannot inflate without end. JPEG 2000,
//! CCITT fax pictures (Group 4, one-dimensional Group 3) are decoded; JBIG2
//! and JPEG 2000 ones are named, not read.

use std::io::Read;
use std::time::Instant;

use crate::ocr::{Ocr, OcrError, Recognized, Source};
// lopdf as pdf-extract builds it (its re-export): the one the PDF reader opens.
use pdf_extract as lopdf;

/// The largest picture decoded from a PDF (pixels).
const MAX_PIXELS: u64 = 8000 * 8000;
/// Pictures smaller than this on either side (icons, rules, logos) are not read.
const MIN_SIDE: i64 = 32;
/// Pictures read on one page at most.
const MAX_PER_PAGE: usize = 8;
/// No new picture is read when less than this is left of the document's time.
const MARGIN: std::time::Duration = std::time::Duration::from_secs(8);

/// One document's OCR: the engine, made when a picture first needs it.
#[derive(Default)]
pub struct Pictures {
    engine: Option<Result<Ocr, OcrError>>,
}

/// What OCR made of a page or picture.
#[derive(Debug, PartialEq, Eq)]
pub enum PictureText {
    Read(Recognized),
    /// Why it was not read ("OCR is not installed", "a JBIG2 picture").
    NotRead(String),
}

impl Pictures {
    fn engine(&mut self) -> Result<&mut Ocr, OcrError> {
        self.engine.get_or_insert_with(Ocr::for_user).as_mut().map_err(|e| e.clone())
    }

    /// The text of an encoded picture file.
    pub fn picture(&mut self, data: &[u8]) -> PictureText {
        let picture = match crate::media::decode(data) {
            Ok(picture) => picture,
            Err(why) => return PictureText::NotRead(why),
        };
        let source = Source::guess(picture.width(), picture.height());
        match self.engine().and_then(|ocr| ocr.read(&picture, source)) {
            Ok(read) => PictureText::Read(read),
            Err(err) => PictureText::NotRead(err.to_string()),
        }
    }

    /// The text in the pictures of a PDF page (one without a text layer), read before `deadline`.
    pub fn pdf_page(&mut self, doc: &lopdf::Document, page: lopdf::ObjectId, deadline: Instant) -> PictureText {
        let images = match doc.get_page_images(page) {
            Ok(images) => images,
            Err(err) => return PictureText::NotRead(format!("its pictures could not be listed ({err})")),
        };
        let width_points = page_width_points(doc, page);
        let mut texts: Vec<String> = Vec::new();
        let (mut confidence, mut took, mut read, mut why) = (0u32, std::time::Duration::ZERO, 0u32, None);
        for image in images.iter().filter(|i| i.width >= MIN_SIDE && i.height >= MIN_SIDE).take(MAX_PER_PAGE) {
            if Instant::now() + MARGIN > deadline {
                why = Some("the time for this document ran out before its pictures were read (ask for this page alone)".to_owned());
                break;
            }
            let picture = match decode_pdf_image(doc, image) {
                Ok(picture) => picture,
                Err(reason) => {
                    why = Some(reason);
                    continue;
                }
            };
            // The picture's resolution as placed on the page (a full-page scan: its width over the page's).
            let ppi = width_points.map(|points| (picture.width() as f32 / (points / 72.0)).round() as u32).filter(|p| (70..=1200).contains(p)).unwrap_or(300);
            match self.engine().and_then(|ocr| ocr.read(&picture, Source::Page { ppi })) {
                Ok(found) => {
                    took += found.took;
                    if !found.text.is_empty() {
                        confidence += u32::from(found.confidence);
                        read += 1;
                        texts.push(found.text);
                    }
                }
                Err(err @ (OcrError::Missing(_) | OcrError::NoLanguages(_) | OcrError::Init(..))) => return PictureText::NotRead(err.to_string()),
                Err(err) => why = Some(err.to_string()),
            }
        }
        match (texts.is_empty(), why) {
            (true, Some(why)) => PictureText::NotRead(why),
            _ => PictureText::Read(Recognized { text: texts.join("\n\n"), confidence: confidence.checked_div(read).unwrap_or(0) as u8, took }),
        }
    }
}

/// The page's width in points (its MediaBox, inherited from the page tree where the page has none).
fn page_width_points(doc: &lopdf::Document, page: lopdf::ObjectId) -> Option<f32> {
    let mut id = page;
    for _ in 0..32 {
        let dict = doc.get_dictionary(id).ok()?;
        if let Ok(mediabox) = dict.get(b"MediaBox").and_then(|o| doc.dereference(o).map(|(_, o)| o)).and_then(lopdf::Object::as_array) {
            let numbers: Vec<f32> = mediabox.iter().filter_map(|n| n.as_float().ok().or_else(|| n.as_i64().ok().map(|i| i as f32))).collect();
            return (numbers.len() == 4).then(|| (numbers[2] - numbers[0]).abs()).filter(|w| *w > 1.0);
        }
        id = dict.get(b"Parent").and_then(lopdf::Object::as_reference).ok()?;
    }
    None
}

/// A PDF image XObject as pixels, or why it cannot be.
pub fn decode_pdf_image(doc: &lopdf::Document, image: &lopdf::xobject::PdfImage) -> Result<image::DynamicImage, String> {
    let (width, height) = (u32::try_from(image.width).map_err(|_| "a picture of negative size")?, u32::try_from(image.height).map_err(|_| "a picture of negative size")?);
    if u64::from(width) * u64::from(height) > MAX_PIXELS || width == 0 || height == 0 {
        return Err(format!("a picture of {width} × {height} pixels (too large to read)"));
    }
    let filters = image.filters.clone().unwrap_or_default();
    match filters.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["DCTDecode"] => crate::media::decode(image.content).map_err(|why| format!("a JPEG picture that cannot be read ({why})")),
        [] | ["FlateDecode"] => {
            let bits = image.bits_per_component.unwrap_or(8);
            let components = components(doc, image.origin_dict).ok_or("a picture in a colour space cowork does not read")?;
            let row = (u64::from(width) * components as u64 * bits as u64).div_ceil(8);
            let expected = row * u64::from(height);
            let params = decode_params(doc, image.origin_dict);
            let predictor = params.and_then(|p| p.get(b"Predictor").and_then(lopdf::Object::as_i64).ok()).unwrap_or(1);
            let samples = if filters.is_empty() {
                image.content.to_vec()
            } else {
                // PNG predictors add one byte per row.
                let limit = if predictor >= 10 { expected + u64::from(height) } else { expected };
                let mut out = Vec::with_capacity(limit.min(64 << 20) as usize);
                flate2::read::ZlibDecoder::new(image.content).take(limit).read_to_end(&mut out).map_err(|e| format!("a compressed picture that does not inflate ({e})"))?;
                match predictor {
                    1 => out,
                    10..=15 => unpredict_png(&out, row as usize, (components * bits as usize).div_ceil(8))?,
                    other => return Err(format!("a picture with predictor {other} (cowork does not read it)")),
                }
            };
            if (samples.len() as u64) < expected {
                return Err("a picture whose data is cut short".into());
            }
            let inverted = decode_inverted(image.origin_dict);
            to_picture(&samples, width, height, components, bits, row as usize, inverted)
        }
        ["CCITTFaxDecode"] => decode_ccitt(doc, image, width, height),
        other => Err(format!("a {} picture (cowork does not decode it)", other.join("+").trim_end_matches("Decode"))),
    }
}

/// A fax-coded picture (CCITT Group 4, or one-dimensional Group 3), what
/// scanners and fax software put in PDFs, as grey pixels: decoded line by
/// line (`fax`) up to the height the picture's dictionary gives, black and
/// white as `BlackIs1` and `Decode` say.
fn decode_ccitt(doc: &lopdf::Document, image: &lopdf::xobject::PdfImage, width: u32, height: u32) -> Result<image::DynamicImage, String> {
    let params = decode_params(doc, image.origin_dict);
    let number = |key: &[u8], default: i64| params.and_then(|p| p.get(key).and_then(lopdf::Object::as_i64).ok()).unwrap_or(default);
    let flag = |key: &[u8]| params.and_then(|p| p.get(key).and_then(lopdf::Object::as_bool).ok()).unwrap_or(false);
    let k = number(b"K", 0);
    let columns = u16::try_from(number(b"Columns", 1728)).ok().filter(|c| *c > 0 && u32::from(*c) == width).ok_or("a fax picture whose width and columns disagree")?;
    let rows = u16::try_from(height).map_err(|_| "a fax picture too tall to read")?;
    let black_is_1 = flag(b"BlackIs1");
    let inverted = decode_inverted(image.origin_dict);
    let mut grey = image::GrayImage::from_pixel(width, height, image::Luma([255]));
    let mut y = 0u32;
    let mut line = |transitions: &[u16]| {
        if y >= height {
            return;
        }
        for (x, colour) in fax::decoder::pels(transitions, columns).enumerate() {
            // The filter's sample: BlackIs1 says which bit is black; DeviceGray shows 1 as white; Decode [1 0] turns it round.
            let bit = (colour == fax::Color::Black) == black_is_1;
            let white = bit != inverted;
            grey.put_pixel(x as u32, y, image::Luma([if white { 255 } else { 0 }]));
        }
        y += 1;
    };
    let decoded = match k {
        k if k < 0 => fax::decoder::decode_g4(image.content.iter().copied(), columns, Some(rows), &mut line),
        0 => fax::decoder::decode_g3(image.content.iter().copied(), &mut line),
        _ => return Err("a two-dimensional Group 3 fax picture (cowork reads Group 4 and one-dimensional Group 3)".into()),
    };
    if decoded.is_none() && y == 0 {
        return Err("a fax picture whose data cannot be decoded".into());
    }
    Ok(image::DynamicImage::ImageLuma8(grey))
}

/// Whether a picture's `Decode` array turns its samples round (`[1 0]`).
fn decode_inverted(dict: &lopdf::Dictionary) -> bool {
    dict.get(b"Decode").and_then(lopdf::Object::as_array).ok().and_then(|d| d.first()).and_then(|n| n.as_i64().ok().or_else(|| n.as_float().ok().map(|f| f as i64))) == Some(1)
}

/// A picture's filter parameters: `DecodeParms` as a dictionary, or the
/// first of an array of them (one per filter, as Pillow and others write it).
fn decode_params<'a>(doc: &'a lopdf::Document, dict: &'a lopdf::Dictionary) -> Option<&'a lopdf::Dictionary> {
    let params = doc.dereference(dict.get(b"DecodeParms").ok()?).ok()?.1;
    match params {
        lopdf::Object::Array(items) => doc.dereference(items.first()?).ok()?.1.as_dict().ok(),
        other => other.as_dict().ok(),
    }
}

/// Colour components of an image's colour space (None: one cowork does not read).
fn components(doc: &lopdf::Document, dict: &lopdf::Dictionary) -> Option<usize> {
    if dict.get(b"ImageMask").and_then(lopdf::Object::as_bool).unwrap_or(false) {
        return Some(1);
    }
    let space = doc.dereference(dict.get(b"ColorSpace").ok()?).ok()?.1;
    let name = match space {
        lopdf::Object::Name(name) => name.clone(),
        lopdf::Object::Array(items) => {
            let family = items.first()?.as_name().ok()?;
            if family == b"ICCBased" {
                let stream = doc.dereference(items.get(1)?).ok()?.1.as_stream().ok()?;
                return stream.dict.get(b"N").and_then(lopdf::Object::as_i64).ok().and_then(|n| usize::try_from(n).ok()).filter(|n| [1, 3, 4].contains(n));
            }
            family.to_vec()
        }
        _ => return None,
    };
    match name.as_slice() {
        b"DeviceGray" | b"CalGray" | b"G" => Some(1),
        b"DeviceRGB" | b"CalRGB" | b"RGB" => Some(3),
        b"DeviceCMYK" | b"CMYK" => Some(4),
        _ => None,
    }
}

/// Undoes PNG's per-row filters (`row`: bytes per row without the filter byte; `pixel`: bytes per pixel).
fn unpredict_png(data: &[u8], row: usize, pixel: usize) -> Result<Vec<u8>, String> {
    let pixel = pixel.max(1);
    let mut out = Vec::with_capacity(data.len());
    let mut previous = vec![0u8; row];
    for chunk in data.chunks(row + 1) {
        if chunk.len() < row + 1 {
            break;
        }
        let (kind, line) = (chunk[0], &chunk[1..]);
        let mut current = line.to_vec();
        for i in 0..row {
            let left = if i >= pixel { current[i - pixel] } else { 0 };
            let up = previous[i];
            let up_left = if i >= pixel { previous[i - pixel] } else { 0 };
            current[i] = current[i].wrapping_add(match kind {
                0 => 0,
                1 => left,
                2 => up,
                3 => ((u16::from(left) + u16::from(up)) / 2) as u8,
                4 => paeth(left, up, up_left),
                other => return Err(format!("a picture with an unknown PNG filter {other}")),
            });
        }
        out.extend_from_slice(&current);
        previous = current;
    }
    Ok(out)
}

fn paeth(a: u8, b: u8, c: u8) -> u8 {
    let p = i16::from(a) + i16::from(b) - i16::from(c);
    let (pa, pb, pc) = ((p - i16::from(a)).abs(), (p - i16::from(b)).abs(), (p - i16::from(c)).abs());
    if pa <= pb && pa <= pc {
        a
    } else if pb <= pc {
        b
    } else {
        c
    }
}

/// Samples as grey pixels (what OCR reads).
fn to_picture(samples: &[u8], width: u32, height: u32, components: usize, bits: i64, row: usize, inverted: bool) -> Result<image::DynamicImage, String> {
    if ![1, 8, 16].contains(&bits) {
        return Err(format!("a picture of {bits} bits per sample (cowork reads 1, 8 and 16)"));
    }
    let mut grey = image::GrayImage::new(width, height);
    for y in 0..height as usize {
        let line = &samples[y * row..(y + 1) * row];
        for x in 0..width as usize {
            let sample = |c: usize| -> u8 {
                match bits {
                    1 => {
                        let bit = x * components + c;
                        if line[bit / 8] >> (7 - bit % 8) & 1 == 1 { 255 } else { 0 }
                    }
                    16 => line[(x * components + c) * 2],
                    _ => line[x * components + c],
                }
            };
            let value = match components {
                1 => sample(0),
                3 => ((u32::from(sample(0)) * 299 + u32::from(sample(1)) * 587 + u32::from(sample(2)) * 114) / 1000) as u8,
                _ => {
                    // CMYK: the darkness is mostly K, plus the inks.
                    let ink = (u32::from(sample(0)) * 30 + u32::from(sample(1)) * 59 + u32::from(sample(2)) * 11) / 100;
                    255 - (u32::from(sample(3)) + ink).min(255) as u8
                }
            };
            grey.put_pixel(x as u32, y as u32, image::Luma([if inverted { 255 - value } else { value }]));
        }
    }
    Ok(image::DynamicImage::ImageLuma8(grey))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_predictors_are_undone_row_by_row() {
        // Two rows of 3 grey bytes: Sub on the first, Up on the second.
        let data = [1, 10, 5, 5, 2, 1, 1, 1];
        assert_eq!(unpredict_png(&data, 3, 1).unwrap(), vec![10, 15, 20, 11, 16, 21]);
        let paeth_row = [4, 10, 20, 30];
        assert_eq!(unpredict_png(&paeth_row, 3, 1).unwrap(), vec![10, 30, 60], "Paeth on the first row is Sub");
        assert!(unpredict_png(&[9, 1, 2, 3], 3, 1).is_err());
    }

    #[test]
    fn one_bit_samples_become_black_and_white_and_decode_inverts() {
        // 10 pixels wide, 1 bit: two bytes a row, the last six bits padding.
        let row = [0b1010_0000u8, 0b1100_0000];
        let picture = to_picture(&row, 10, 1, 1, 1, 2, false).unwrap().to_luma8();
        let pixels: Vec<u8> = picture.pixels().map(|p| p.0[0]).collect();
        assert_eq!(pixels, vec![255, 0, 255, 0, 0, 0, 0, 0, 255, 255]);
        let inverted = to_picture(&row, 10, 1, 1, 1, 2, true).unwrap().to_luma8();
        assert_eq!(inverted.get_pixel(0, 0).0[0], 0);
        // RGB and CMYK to grey: white stays white, full black ink is black.
        assert_eq!(to_picture(&[255, 255, 255], 1, 1, 3, 8, 3, false).unwrap().to_luma8().get_pixel(0, 0).0[0], 255);
        assert_eq!(to_picture(&[0, 0, 0, 255], 1, 1, 4, 8, 4, false).unwrap().to_luma8().get_pixel(0, 0).0[0], 0);
        assert_eq!(to_picture(&[0, 0, 0, 0], 1, 1, 4, 8, 4, false).unwrap().to_luma8().get_pixel(0, 0).0[0], 255);
    }
}
