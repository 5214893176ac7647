//! Models: the upstream download path against a real HTTP server on loopback
//! (resume, checksum, confinement), and the Whisper converter on real weights.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use cowork::models::{Manifest, ManifestFile, ModelRole, check_file, sha256_file, whisper_convert};
use cowork::models::events::ModelsEvent;
use cowork::models::fetch::Fetcher;

use super::support::{have_program, models_dir, require, temp_dir, whisper_model};

/// A tiny HTTP/1.1 file server that honours `Range: bytes=N-` and can cut the
/// first response short, like a dropped connection.
/// A file the server offers: its path and its bytes.
type NamedFile = (String, Vec<u8>);

pub(super) struct FileServer {
    pub(super) base: String,
    pub(super) ranges_seen: Arc<Mutex<Vec<Option<String>>>>,
    files: Arc<Mutex<Vec<NamedFile>>>,
    /// A pause after each 256 KB sent (a slow line, so a download can be cancelled mid-file).
    pub(super) pause_per_chunk: Arc<Mutex<std::time::Duration>>,
    /// The next response is cut after this many bytes (a dropped connection).
    cut_next: Arc<Mutex<Option<usize>>>,
}

impl FileServer {
    /// Serves `body` at every path.
    fn start(body: Vec<u8>, cut_first_after: Option<usize>) -> FileServer {
        Self::serve(vec![(String::new(), body)], cut_first_after)
    }

    /// Cuts the next response after `bytes`.
    pub(super) fn cut_next(&self, bytes: usize) {
        *self.cut_next.lock().unwrap() = Some(bytes);
    }

    /// Serves `body` at `path` from now on (a mirror whose file was mended).
    pub(super) fn replace(&self, path: &str, body: Vec<u8>) {
        let mut files = self.files.lock().unwrap();
        files.retain(|(p, _)| p != path);
        files.push((path.to_owned(), body));
    }

    /// Serves each (path, body); an empty path answers every request.
    pub(super) fn serve(files: Vec<(String, Vec<u8>)>, cut_first_after: Option<usize>) -> FileServer {
        let files = Arc::new(Mutex::new(files));
        let pause_per_chunk = Arc::new(Mutex::new(std::time::Duration::ZERO));
        let cut_next = Arc::new(Mutex::new(cut_first_after));
        let (served, pause, cut) = (files.clone(), pause_per_chunk.clone(), cut_next.clone());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let ranges_seen = Arc::new(Mutex::new(Vec::new()));
        let seen = ranges_seen.clone();
        std::thread::Builder::new()
            .name("test-http".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    let Ok(mut stream) = stream else { break };
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut range = None;
                    let mut line = String::new();
                    let _ = reader.read_line(&mut line);
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    line.clear();
                    while reader.read_line(&mut line).is_ok_and(|read| read > 0) && line != "\r\n" {
                        if let Some(value) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
                            range = Some(value.trim().trim_end_matches('-').to_owned());
                        }
                        line.clear();
                    }
                    seen.lock().unwrap().push(range.clone());
                    let Some(body) = served.lock().unwrap().iter().find(|(p, _)| p.is_empty() || *p == path).map(|(_, b)| b.clone()) else {
                        let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                        continue;
                    };
                    let start: usize = range.as_deref().and_then(|r| r.parse().ok()).unwrap_or(0);
                    let slice = &body[start.min(body.len())..];
                    let status = if start > 0 { "206 Partial Content" } else { "200 OK" };
                    let header = format!(
                        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{}\r\nConnection: close\r\n\r\n",
                        slice.len(),
                        body.len().saturating_sub(1),
                        body.len()
                    );
                    let _ = stream.write_all(header.as_bytes());
                    let send = match cut.lock().unwrap().take() {
                        Some(cut) => &slice[..cut.min(slice.len())],
                        None => slice,
                    };
                    let pause = *pause.lock().unwrap();
                    for chunk in send.chunks(256 * 1024) {
                        if stream.write_all(chunk).is_err() {
                            break;
                        }
                        if !pause.is_zero() {
                            std::thread::sleep(pause);
                        }
                    }
                    let _ = stream.flush();
                }
            })
            .unwrap();
        FileServer { base, ranges_seen, files, pause_per_chunk, cut_next }
    }
}

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

fn manifest_file(body: &[u8], path: &str, url: String) -> ManifestFile {
    use sha2::Digest;
    ManifestFile {
        path: path.into(),
        size: body.len() as u64,
        sha256: hex::encode(sha2::Sha256::digest(body)),
        url,
        package: None,
        package_parts: Vec::new(),
    }
}

#[test]
fn an_interrupted_download_resumes_and_is_verified() {
    let body = payload(3_000_000);
    let server = FileServer::start(body.clone(), Some(1_000_000));
    let dir = temp_dir();
    // The upstream URL names the hub; --mirror points it at the loopback server.
    let file = manifest_file(&body, "chat/model.gguf", "https://huggingface.co/org/repo/resolve/main/model.gguf".into());
    let fetcher = Fetcher::new(Some(server.base.clone()));
    let mut progress = Vec::new();
    let path = fetcher.fetch(dir.path(), &file, &mut |p| progress.push(p.done_bytes)).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), body);
    assert!(check_file(&path, file.size, &file.sha256, true).is_ok());
    let ranges = server.ranges_seen.lock().unwrap().clone();
    assert_eq!(ranges[0], None, "first request asks for everything");
    assert_eq!(ranges[1].as_deref(), Some("1000000"), "second request resumes where the first broke: {ranges:?}");
    assert_eq!(progress.last().copied(), Some(3_000_000));
    assert!(!path.with_file_name("model.gguf.part").exists());
    // Already there and verified: no new request.
    let requests = ranges.len();
    fetcher.fetch(dir.path(), &file, &mut |_| {}).unwrap();
    assert_eq!(server.ranges_seen.lock().unwrap().len(), requests);
}

#[test]
fn a_checksum_mismatch_is_refused_and_the_partial_file_removed() {
    let body = payload(200_000);
    let server = FileServer::start(body.clone(), None);
    let dir = temp_dir();
    let mut file = manifest_file(&body, "model.bin", format!("{}/model.bin", server.base));
    file.sha256 = "0".repeat(64);
    let err = Fetcher::new(None).fetch(dir.path(), &file, &mut |_| {}).unwrap_err();
    assert!(format!("{err:#}").contains("checksum mismatch"), "{err:#}");
    assert!(!dir.path().join("model.bin").exists() && !dir.path().join("model.bin.part").exists());
}

#[test]
fn paths_outside_the_models_directory_are_refused_before_any_request() {
    let body = payload(10);
    let server = FileServer::start(body.clone(), None);
    let dir = temp_dir();
    for evil in ["../escape.bin", "/tmp/escape.bin", "a/../../escape.bin"] {
        let file = manifest_file(&body, evil, format!("{}/x", server.base));
        assert!(Fetcher::new(None).fetch(dir.path(), &file, &mut |_| {}).is_err(), "{evil}");
    }
    // A symlinked directory inside models/ that points outside is refused too.
    let outside = temp_dir();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
    let file = manifest_file(&body, "link/escape.bin", format!("{}/x", server.base));
    assert!(Fetcher::new(None).fetch(dir.path(), &file, &mut |_| {}).is_err());
    assert!(server.ranges_seen.lock().unwrap().is_empty(), "no request was made");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[test]
fn whisper_conversion_matches_the_manifest_and_transcribes_real_speech() {
    let source = models_dir().join("whisper-tiny-en/source");
    if !require(source.join("model.bin").is_file(), "the Whisper CTranslate2 source files")
        || !require(have_program("espeak-ng") && have_program("sox"), "espeak-ng and sox")
    {
        return;
    }
    let manifest = Manifest::bundled().unwrap();
    let converted = manifest.by_role(ModelRole::Speech).unwrap().converted.clone().unwrap();
    let dir = temp_dir();
    let out = dir.path().join("ggml-tiny.en.bin");
    let size = whisper_convert::convert(&source.join("model.bin"), &source.join("mel_filters.npz"), &source.join("gpt2.tiktoken"), &out)
        .unwrap();
    assert_eq!(size, 77_704_715, "same size as the published ggml-tiny.en.bin");
    assert_eq!(size, converted.size);
    assert_eq!(sha256_file(&out).unwrap(), converted.sha256);

    let wav = dir.path().join("speech.wav");
    let raw = dir.path().join("speech.raw");
    let sentence = "Please open the calendar and schedule a meeting for tomorrow at ten.";
    assert!(std::process::Command::new("espeak-ng").arg("-w").arg(&wav).arg(sentence).status().unwrap().success());
    assert!(std::process::Command::new("sox")
        .arg(&wav)
        .args(["-r", "16000", "-c", "1", "-e", "float", "-b", "32", "-t", "raw"])
        .arg(&raw)
        .status()
        .unwrap()
        .success());
    let samples: Vec<f32> = std::fs::read(&raw).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let _turn = super::support::whisper_turn();
    let models = cowork::audio::transcribe::SpeechModels { whisper: out.clone(), vad: None, english_only: true };
    let mut transcriber = cowork::audio::transcribe::Transcriber::load(&models, Default::default()).unwrap();
    let heard = transcriber.transcribe(&samples, None).unwrap();
    let text = heard.text().unwrap_or_default().to_lowercase();
    for word in ["calendar", "schedule", "meeting", "tomorrow"] {
        assert!(text.contains(word), "transcript {text:?} lacks {word:?}");
    }
}

#[test]
fn a_corrupt_whisper_file_is_refused_before_whisper_cpp_sees_it() {
    let dir = temp_dir();
    let bad = dir.path().join("ggml.bin");
    std::fs::write(&bad, b"lmgg but not really").unwrap();
    let err = cowork::native::whisper_probe(&bad).unwrap_err();
    assert!(format!("{err:#}").contains("Whisper model"), "{err:#}");
    if whisper_model().is_file() {
        assert!(cowork::native::whisper_probe(&whisper_model()).is_ok());
    }
}

#[test]
fn the_real_chat_model_header_reads_and_fits_this_machine() {
    if !super::support::require(super::support::chat_model().is_file(), "the chat model") {
        return;
    }
    let info = cowork::models::gguf::read_info(&super::support::chat_model()).unwrap();
    // SmolLM2-135M: a llama with 30 blocks, 576 wide, 9 heads of which 3 for keys and values.
    assert_eq!((info.architecture.as_str(), info.block_count, info.embedding_length, info.head_count, info.head_count_kv), ("llama", 30, 576, 9, 3));
    assert!(info.context_length >= 2048);
    let (available, total) = cowork::llm::memory::meminfo().unwrap();
    let check = cowork::models::gguf::preflight(&info, 1_900, available, total);
    assert_eq!(check.verdict, cowork::models::gguf::Verdict::Green, "{}", check.describe());
    // A pretend 2 GB machine with 300 MB free refuses it.
    assert_eq!(cowork::models::gguf::preflight(&info, 1_900, 300_000_000, 2_000_000_000).verdict, cowork::models::gguf::Verdict::Red);
}

/// A manifest of one model made of `file`.
fn one_model(file: ManifestFile, optional: bool) -> Manifest {
    Manifest {
        models: vec![cowork::models::ManifestModel {
            name: "test-model".into(),
            role: ModelRole::Chat,
            licence: "MIT".into(),
            upstream: "test".into(),
            files: vec![file],
            converted: None,
            optional,
            summary: String::new(),
            evaluation: String::new(),
            kv_bytes_per_token: 0,
        }],
    }
}

#[test]
fn the_models_worker_downloads_a_missing_file_with_progress_and_resumes_a_cut() {
    use cowork::events::AppEvent;
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let server = FileServer::start(body.clone(), Some(100_000));
    let dir = temp_dir();
    let file = manifest_file(&body, "test/weights.bin", format!("{}/weights.bin", server.base));
    let (sink, events) = super::support::test_sink();
    let mut worker = cowork::models::worker::spawn_models(one_model(file, false), dir.path().to_owned(), None, sink.narrow(), cowork::runtime::RestartPolicy::default()).unwrap();
    worker.commands.send(cowork::models::worker::ModelsCommand::FetchAll).unwrap();
    let mut progress = Vec::new();
    let done = super::support::wait_for(&events, std::time::Duration::from_secs(30), |e| match e {
        AppEvent::Models(ModelsEvent::ModelDownload { done_bytes, total_bytes, error, .. }) => {
            assert!(error.is_none(), "{error:?}");
            progress.push((*done_bytes, *total_bytes));
            None
        }
        AppEvent::Models(ModelsEvent::ModelsChanged { outcome: Ok(text), .. }) if text.contains("present and verified") => Some(()),
        _ => None,
    });
    assert!(done.is_some(), "finished: {progress:?}");
    assert!(progress.len() >= 2 && progress.last() == Some(&(body.len() as u64, body.len() as u64)), "{progress:?}");
    assert_eq!(std::fs::read(dir.path().join("test/weights.bin")).unwrap(), body);
    assert!(server.ranges_seen.lock().unwrap().iter().any(|r| r.is_some()), "the cut download resumed with a Range request");
    assert!(worker.shutdown(cowork::models::worker::ModelsCommand::Shutdown, std::time::Duration::from_secs(5)));
}

/// A sentence spoken by espeak-ng in `voice`, as 16 kHz mono samples.
fn spoken(dir: &std::path::Path, voice: &str, sentence: &str) -> Vec<f32> {
    let (wav, raw) = (dir.join(format!("{voice}.wav")), dir.join(format!("{voice}.raw")));
    assert!(std::process::Command::new("espeak-ng").args(["-v", voice, "-w"]).arg(&wav).arg(sentence).status().unwrap().success());
    assert!(std::process::Command::new("sox").arg(&wav).args(["-r", "16000", "-c", "1", "-e", "float", "-b", "32", "-t", "raw"]).arg(&raw).status().unwrap().success());
    std::fs::read(&raw).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// The optional multilingual Whisper, the way Settings → Models → Install
/// gets it: the models worker downloads its three sources from their
/// upstream URLs (a loopback server standing in), verifies them, converts
/// them (the multilingual vocabulary, byte for byte the published
/// ggml-base.bin's size), and the result detects and transcribes English
/// and German; Remove deletes every file and folder it made.
#[test]
fn the_optional_multilingual_whisper_installs_converts_hears_two_languages_and_removes() {
    use cowork::events::AppEvent;
    use cowork::models::worker::ModelsCommand;
    let bundled = Manifest::bundled().unwrap();
    let mut base = bundled.model("whisper-base").expect("the manifest lists whisper-base").clone();
    assert!(base.optional, "whisper-base is installed only on request");
    let have_sources = base.files.iter().all(|f| models_dir().join(&f.path).is_file());
    if !require(have_sources, "whisper-base's sources (models/fetch --with whisper-base)")
        || !require(have_program("espeak-ng") && have_program("sox"), "espeak-ng and sox")
    {
        return;
    }
    let served: Vec<(String, Vec<u8>)> = base
        .files
        .iter()
        .map(|f| (format!("/{}", f.url.split_once("://").unwrap().1.split_once('/').unwrap().1), std::fs::read(models_dir().join(&f.path)).unwrap()))
        .collect();
    let server = FileServer::serve(served, None);
    for file in &mut base.files {
        let path = file.url.split_once("://").unwrap().1.split_once('/').unwrap().1.to_owned();
        file.url = format!("{}/{path}", server.base);
    }
    let manifest = Manifest { models: vec![base.clone()] };
    let dir = temp_dir();
    let (sink, events) = super::support::test_sink();
    let mut worker = cowork::models::worker::spawn_models(manifest.clone(), dir.path().to_owned(), None, sink.narrow(), cowork::runtime::RestartPolicy::default()).unwrap();
    let outcome = |events: &crossbeam_channel::Receiver<AppEvent>, seen: &mut Vec<String>| {
        super::support::wait_for(events, std::time::Duration::from_secs(300), |e| match e {
            AppEvent::Models(ModelsEvent::ModelDownload { path, error, .. }) => {
                assert!(error.is_none(), "{path}: {error:?}");
                seen.push(path.clone());
                None
            }
            AppEvent::Models(ModelsEvent::ModelsChanged { name, outcome }) => Some((name.clone(), outcome.clone())),
            _ => None,
        })
        .expect("the worker answers")
    };
    worker.commands.send(ModelsCommand::Install("whisper-tiny-en".into())).unwrap();
    let (_, refused) = outcome(&events, &mut Vec::new());
    assert!(refused.as_ref().is_err_and(|e| e.contains("no model named whisper-tiny-en")), "{refused:?}");

    let started = std::time::Instant::now();
    worker.commands.send(ModelsCommand::Install("whisper-base".into())).unwrap();
    let mut seen = Vec::new();
    let (name, installed) = outcome(&events, &mut seen);
    eprintln!("whisper-base installed over loopback in {:.1} s", started.elapsed().as_secs_f64());
    assert_eq!(name, "whisper-base");
    assert!(installed.as_ref().is_ok_and(|t| t.contains("installed and verified")), "{installed:?}");
    for file in &base.files {
        assert!(seen.contains(&file.path), "progress for {}: {seen:?}", file.path);
    }
    let converted = base.converted.clone().unwrap();
    assert_eq!(converted.size, 147_951_465, "the published ggml-base.bin's size");
    assert!(check_file(&dir.path().join(&converted.path), converted.size, &converted.sha256, true).is_ok());

    let models = cowork::audio::transcribe::SpeechModels::resolve(&manifest, dir.path(), Some("whisper-base")).unwrap();
    assert!(!models.english_only);
    let _turn = super::support::whisper_turn();
    let mut transcriber = cowork::audio::transcribe::Transcriber::load(&models, Default::default()).unwrap();
    let audio = temp_dir();
    for (voice, sentence, language, words) in [
        ("en", "Please open the calendar and schedule a meeting for tomorrow at ten.", "en", &["calendar", "meeting", "tomorrow"][..]),
        ("de", "Bitte öffne den Kalender und plane ein Treffen für morgen um zehn Uhr.", "de", &["bitte", "morgen", "uhr"][..]),
    ] {
        let heard = transcriber.transcribe(&spoken(audio.path(), voice, sentence), None).unwrap();
        let cowork::audio::transcribe::Heard::Speech(transcript) = heard else { panic!("{voice}: heard nothing: {heard:?}") };
        eprintln!("{voice}: {:?} ({}, {} ms)", transcript.text, transcript.language, transcript.elapsed_millis);
        assert_eq!(transcript.language, language, "{transcript:?}");
        let text = transcript.text.to_lowercase();
        for word in words {
            assert!(text.contains(word), "{voice}: {text:?} lacks {word:?}");
        }
    }
    drop(transcriber);

    worker.commands.send(ModelsCommand::Remove("whisper-base".into())).unwrap();
    let (_, removed) = outcome(&events, &mut Vec::new());
    assert!(removed.as_ref().is_ok_and(|t| t.contains("removed")), "{removed:?}");
    assert!(!dir.path().join("whisper-base").exists(), "its files and folders are gone");
    assert!(worker.shutdown(ModelsCommand::Shutdown, std::time::Duration::from_secs(5)));
}

#[test]
fn minilm_embeddings_rank_a_paraphrase_high_and_an_unrelated_sentence_near_zero() {
    let dir = cowork::memory::embed::model_dir(&models_dir());
    if !require(dir.join("model.safetensors").is_file(), "the embedding model") {
        return;
    }
    let embedder = cowork::memory::embed::Embedder::load(&dir).unwrap();
    // One batch of different lengths: padding must not change a text's vector.
    let texts = ["The cat sat on the mat.", "A feline rested on a rug.", "Quarterly revenue grew by ten percent.", "The cat sat on the mat. The cat sat on the mat. The cat sat on the mat. The dog did not."];
    let vectors = embedder.embed(&texts).unwrap();
    assert!(vectors.iter().all(|v| v.len() == cowork::memory::embed::DIMENSIONS));
    let norm: f32 = vectors[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "unit length: {norm}");
    let paraphrase = cowork::memory::embed::cosine(&vectors[0], &vectors[1]);
    let unrelated = cowork::memory::embed::cosine(&vectors[0], &vectors[2]);
    assert!(paraphrase > 0.45, "paraphrase {paraphrase}");
    assert!(unrelated.abs() < 0.15, "unrelated {unrelated}");
    let alone = embedder.embed(&texts[..1]).unwrap();
    assert!(cowork::memory::embed::cosine(&alone[0], &vectors[0]) > 0.9999, "padding in a batch changed the vector");
    // A damaged weights file is a clear error, not a crash.
    let broken = temp_dir();
    for name in ["config.json", "tokenizer.json"] {
        std::fs::copy(dir.join(name), broken.path().join(name)).unwrap();
    }
    std::fs::write(broken.path().join("model.safetensors"), b"not weights").unwrap();
    let err = cowork::memory::embed::Embedder::load(broken.path()).err().expect("refused");
    assert!(format!("{err:#}").contains("model.safetensors"), "{err:#}");
}

/// A minimal GGUF v3 header with only `general.architecture` set.
fn gguf_with_architecture(architecture: &str) -> Vec<u8> {
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(0u64.to_le_bytes()); // tensors
    bytes.extend(1u64.to_le_bytes()); // metadata entries
    let key = b"general.architecture";
    bytes.extend((key.len() as u64).to_le_bytes());
    bytes.extend(key);
    bytes.extend(8u32.to_le_bytes()); // string
    bytes.extend((architecture.len() as u64).to_le_bytes());
    bytes.extend(architecture.as_bytes());
    bytes
}

#[test]
fn a_gguf_the_user_has_is_checked_recorded_and_answers_and_bad_files_are_refused_clearly() {
    let smollm2 = super::support::chat_model();
    if !require(smollm2.is_file(), "the SmolLM2 model") {
        return;
    }
    let data = temp_dir();
    let cowork = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_cowork"))
            .arg("--data-dir")
            .arg(data.path())
            .arg("--models-dir")
            .arg(models_dir())
            .args(args)
            .env("COWORK_LOG", "error")
            .output()
            .unwrap()
    };
    // Not a model, and a model of an architecture the engine does not run: clear refusals, nothing recorded.
    let junk = data.path().join("holiday.gguf");
    std::fs::write(&junk, b"these are not weights").unwrap();
    let out = cowork(&["models", "add", junk.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a GGUF file"), "{}", String::from_utf8_lossy(&out.stderr));
    let gemma = data.path().join("gemma-3-1b.gguf");
    std::fs::write(&gemma, gguf_with_architecture("gemma3")).unwrap();
    let out = cowork(&["models", "add", gemma.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("architecture \"gemma3\" is not supported") && stderr.contains("qwen2"), "{stderr}");
    assert!(!data.path().join("user-models.json").exists());

    // A real GGUF: measured and recorded where it is, then it answers by its name.
    let out = cowork(&["models", "add", smollm2.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(data.path().join("user-models.json")).unwrap()).unwrap();
    let model = &listed["models"][0];
    let manifest = Manifest::bundled().unwrap();
    let bundled = manifest.models.iter().find(|m| m.name == "smollm2-135m-instruct").unwrap();
    assert_eq!(model["sha256"].as_str().unwrap(), bundled.files[0].sha256, "the recorded sha256 is the file's");
    assert_eq!(model["architecture"], "llama");
    let name = model["name"].as_str().unwrap().to_owned();
    let out = cowork(&["ask", "--forget", "--local-model", &name, "What is the capital of France?"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stdout).trim().is_empty());
}
