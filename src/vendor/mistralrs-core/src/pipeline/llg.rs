use std::sync::Arc;

use anyhow::Result;
use llguidance::{api::TopLevelGrammar, ParserFactory};
use tokenizers::Tokenizer;

use crate::Constraint;

pub fn build_llg_factory(tokenizer: Tokenizer) -> Result<Arc<ParserFactory>> {
    build_llg_factory_shared(Arc::new(tokenizer), &[])
}

/// cowork patch (PATCH.md, change 10): the token environment shares the pipeline's tokenizer.
///
/// Upstream's `ByteTokenizerEnv` keeps its own copy of the Hugging Face tokenizer (adjusted by
/// `ByteTokenizer::from_tokenizer`) for the life of the model, though llguidance only uses it to
/// tokenize grammar literals; decoding every generated token goes through the token trie. For
/// Qwen2.5's 151k-token vocabulary that copy is tens of MB. Here the adjusted copy is built for
/// the trie, dropped, and built again from the pipeline's own tokenizer only if a grammar needs
/// it (`SharedTokenizerEnv::byte_tokenizer`).
///
/// cowork patch (change 14): `end_tokens` (the pipeline's stop tokens) end a grammar as the
/// tokenizer's EOS does; a grammar otherwise forbade Qwen2.5's `<|im_end|>` and the model wrote
/// on past its answer.
pub fn build_llg_factory_shared(tokenizer: Arc<Tokenizer>, end_tokens: &[u32]) -> Result<Arc<ParserFactory>> {
    let env: toktrie::TokEnv = Arc::new(SharedTokenizerEnv::new(tokenizer, end_tokens)?);
    // cowork patch: no token slices at load. llguidance's general slices (a per-slice token
    // trie that speeds up grammar masks) cost 66 MB for Qwen2.5's 151k-token vocabulary and
    // 20 MB for SmolLM2, held for the model's life though most requests carry no grammar; the
    // engine derives a sliced factory from this one when the first grammar arrives
    // (`with_general_slices`).
    let factory = ParserFactory::new(&env, toktrie::InferenceCapabilities::default(), &[])?;
    Ok(Arc::new(factory))
}

/// llguidance's view of the tokenizer: the token trie, and the pipeline's tokenizer from which
/// the adjusted copy that tokenizes grammar literals is made on first use.
struct SharedTokenizerEnv {
    tok_trie: toktrie::TokTrie,
    tokenizer: Arc<Tokenizer>,
    byte_tokenizer: std::sync::OnceLock<toktrie_hf_tokenizers::ByteTokenizer>,
}

impl SharedTokenizerEnv {
    fn new(tokenizer: Arc<Tokenizer>, end_tokens: &[u32]) -> Result<Self> {
        // Special tokens, as the pipeline's tokenizer has them (from_tokenizer adjusts its copy).
        let added_special: Vec<(u32, String)> = tokenizer
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(_, at)| at.special)
            .map(|(id, at)| (id, at.content))
            .collect();

        let bt = toktrie_hf_tokenizers::ByteTokenizer::from_tokenizer((*tokenizer).clone())?;
        let info = bt.tokrx_info();
        let mut token_bytes = bt.token_bytes();
        drop(bt);

        // Fix up special tokens that from_tokenizer() may have missed.
        // Tekken tokenizers add special tokens to the BPE base vocab first, which can
        // prevent the toktrie builder from applying the SPECIAL_TOKEN_MARKER prefix.
        for (id, content) in &added_special {
            let idx = *id as usize;
            if idx < token_bytes.len()
                && (token_bytes[idx].is_empty()
                    || token_bytes[idx][0] != toktrie::TokTrie::SPECIAL_TOKEN_MARKER)
            {
                let mut bytes = content.as_bytes().to_vec();
                bytes.insert(0, toktrie::TokTrie::SPECIAL_TOKEN_MARKER);
                token_bytes[idx] = bytes;
            }
        }

        let tok_trie = toktrie::TokTrie::from(&info, &token_bytes);
        let mut ends = vec![tok_trie.eos_token()];
        for &t in end_tokens {
            if !ends.contains(&t) {
                ends.push(t);
            }
        }
        let tok_trie = tok_trie.with_eos_tokens(&ends);
        Ok(Self {
            tok_trie,
            tokenizer,
            byte_tokenizer: std::sync::OnceLock::new(),
        })
    }

    fn byte_tokenizer(&self) -> &toktrie_hf_tokenizers::ByteTokenizer {
        self.byte_tokenizer.get_or_init(|| {
            toktrie_hf_tokenizers::ByteTokenizer::from_tokenizer((*self.tokenizer).clone())
                .expect("the same tokenizer was accepted when the model loaded")
        })
    }

    fn encode(&self, s: &str) -> Vec<toktrie::TokenId> {
        self.byte_tokenizer()
            .hf_tokenizer
            .encode(s, false)
            .expect("tokenizer error")
            .get_ids()
            .to_vec()
    }
}

impl toktrie::TokenizerEnv for SharedTokenizerEnv {
    fn tok_trie(&self) -> &toktrie::TokTrie {
        &self.tok_trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<toktrie::TokenId> {
        self.tok_trie
            .tokenize_with_greedy_fallback(s, |s| self.encode(s))
    }

    fn tokenize_bytes_special(&self, s: &[u8]) -> Vec<toktrie::TokenId> {
        self.tok_trie.tokenize_with_greedy_fallback(s, |s| {
            self.tok_trie.tokenize_with_special(s, |s| self.encode(s))
        })
    }
}

/// cowork patch: the factory with llguidance's general token slices, for grammar requests.
pub fn with_general_slices(factory: &ParserFactory) -> Result<Arc<ParserFactory>> {
    Ok(Arc::new(factory.with_slices(
        &llguidance::earley::SlicedBiasComputer::general_slices(),
    )?))
}

pub fn llg_grammar_from_constraint(constraint: &Constraint) -> Result<Option<TopLevelGrammar>> {
    let grm = match constraint {
        Constraint::Regex(regex) => TopLevelGrammar::from_regex(regex),
        Constraint::Lark(lark) => TopLevelGrammar::from_lark(lark.clone()),
        Constraint::JsonSchema(value) => TopLevelGrammar::from_json_schema(value.clone()),
        Constraint::Llguidance(value) => value.clone(),
        Constraint::None => return Ok(None),
    };
    Ok(Some(grm))
}

pub fn constraint_from_llg_grammar(
    factory: &ParserFactory,
    grm: TopLevelGrammar,
) -> Result<llguidance::Matcher> {
    let parser = factory.create_parser(grm)?;
    Ok(llguidance::Matcher::new(Ok(parser)))
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;
    use std::sync::Arc;

    use tokenizers::Tokenizer;
    use toktrie::TokenizerEnv;

    use super::SharedTokenizerEnv;

    /// A byte-level BPE with merges, a word-initial space (`Ġ`) and a special token.
    const TOKENIZER_JSON: &str = r#"{
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [{"id": 9, "content": "<|im_end|>", "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true}],
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
            "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
            "vocab": {"a": 0, "b": 1, "c": 2, "Ġ": 3, "ab": 4, "Ġab": 5, "abc": 6, "Ġc": 7, "{": 8},
            "merges": ["a b", "Ġ ab", "ab c", "Ġ c"]}
    }"#;

    /// The shared environment tokenizes exactly as upstream's `ByteTokenizerEnv` over its own
    /// copy, and builds its adjusted tokenizer only when a grammar literal needs it.
    #[test]
    fn shared_env_tokenizes_like_upstream_and_only_on_demand() {
        let tokenizer = Tokenizer::from_str(TOKENIZER_JSON).unwrap();
        let shared = SharedTokenizerEnv::new(Arc::new(tokenizer.clone()), &[]).unwrap();
        let bt = toktrie_hf_tokenizers::ByteTokenizer::from_tokenizer(tokenizer).unwrap();
        let upstream = toktrie_hf_tokenizers::ByteTokenizerEnv::new(bt, None).unwrap();
        assert!(shared.byte_tokenizer.get().is_none(), "no copy at load");
        assert_eq!(shared.tok_trie().token(5), b" ab", "byte-level token bytes");
        for text in ["abc ab", "ab ab c", "cab{", "a b c", "<|im_end|>ab"] {
            assert_eq!(
                shared.tokenize_bytes(text.as_bytes()),
                upstream.tokenize_bytes(text.as_bytes()),
                "{text:?}"
            );
            assert_eq!(
                shared.tokenize_bytes_special(text.as_bytes()),
                upstream.tokenize_bytes_special(text.as_bytes()),
                "{text:?} with special tokens"
            );
        }
        assert!(shared.byte_tokenizer.get().is_some());
        assert_eq!(
            shared.tok_trie().vocab_size(),
            upstream.tok_trie().vocab_size()
        );
        assert_eq!(
            shared.tok_trie().eos_token(),
            upstream.tok_trie().eos_token()
        );
    }
}
