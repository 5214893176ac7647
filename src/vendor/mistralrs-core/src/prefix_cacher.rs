use candle_core::{Device, Result};
use indexmap::IndexMap;
use itertools::Itertools;
use tracing::info;

use crate::{
    kv_cache::{RecurrentStateSnapshot, SingleCache},
    paged_attention::block_hash::BlockHash,
    pipeline::KvCache,
    sequence::Sequence,
};

#[derive(PartialEq, Eq, Debug, Hash)]
struct Tokens(Vec<u32>);

impl Tokens {
    /// Returns the length of the common prefix shared with `other`.
    fn shared_prefix_len(&self, other: &Self) -> usize {
        self.0
            .iter()
            .zip(other.0.iter())
            .take_while(|(a, b)| a == b)
            .count()
    }
}

impl From<Vec<u32>> for Tokens {
    fn from(value: Vec<u32>) -> Self {
        Self(value)
    }
}

#[derive(Clone)]
struct CacheElement {
    cache: Vec<Option<KvCache>>,
    /// Recurrent state snapshots for hybrid models (one per recurrent layer)
    recurrent_snapshots: Option<Vec<RecurrentStateSnapshot>>,
    audio_hashes: Option<Vec<u64>>,
    image_hashes: Option<Vec<u64>>,
    video_hashes: Option<Vec<u64>>,
}

impl CacheElement {
    /// cowork patch: how many positions of this entry hold computed keys and values. A finished
    /// sequence's tokens end with the token it sampled last, which was never fed to the model,
    /// so its cache is one position shorter than its tokens; a match must stop there, or the
    /// next prompt would attend to a position that holds no key (zeros or stale data).
    fn kv_len(&self) -> Option<usize> {
        self.cache
            .iter()
            .flatten()
            .filter_map(|layer| match layer {
                KvCache::Normal { k, v } => Some(k.current_seq_len().min(v.current_seq_len())),
                _ => None,
            })
            .min()
    }

    /// cowork patch: bytes of keys and values this entry holds (its storage, whole capacity).
    fn kv_bytes(&self) -> usize {
        let bytes = |t: Option<&candle_core::Tensor>| {
            t.map_or(0, |t| t.elem_count() * t.dtype().size_in_bytes())
        };
        self.cache
            .iter()
            .flatten()
            .map(|layer| match layer {
                KvCache::Normal { k, v } => bytes(k.all_data()) + bytes(v.all_data()),
                KvCache::Rotating { k, v } => bytes(k.all_data()) + bytes(v.all_data()),
                KvCache::Shared { .. } => 0,
            })
            .sum()
    }

    /// cowork patch: the entry with each key and value buffer cut to the positions it holds,
    /// when it fills less than three quarters of it.
    ///
    /// A finished sequence's cache is the model's buffer, grown in blocks of 512 positions
    /// (and filled with zeros when allocated, so all of it is resident): a 216-token answer on
    /// SmolLM2 kept 512 positions, 24 MB instead of 10 MB. A copy of exactly its positions
    /// costs a few milliseconds once; an entry that fills most of its buffer keeps sharing it,
    /// since a copy would hold both until the next prompt replaces the model's buffer.
    fn trimmed(mut self) -> Self {
        fn trim(cache: &mut SingleCache) {
            let len = cache.current_seq_len;
            let Some(data) = cache.all_data.as_ref() else {
                return;
            };
            if len * 4 >= cache.capacity_seq_len * 3 {
                return;
            }
            // On failure the entry keeps its buffer: only memory is at stake.
            if let Ok(exact) = data
                .narrow(cache.dim, 0, len)
                .and_then(|t| t.force_contiguous())
            {
                cache.all_data = Some(exact);
                cache.capacity_seq_len = len;
            }
        }
        for layer in self.cache.iter_mut().flatten() {
            if let KvCache::Normal { k, v } = layer {
                trim(k);
                trim(v);
            }
        }
        self
    }

    fn has_media(&self) -> bool {
        self.image_hashes.is_some() || self.audio_hashes.is_some() || self.video_hashes.is_some()
    }

    fn can_rewind_to(&self, len: usize) -> bool {
        self.cache
            .iter()
            .flatten()
            .all(|layer| layer.try_set_len(len).is_ok())
    }
}

pub struct PrefixCacheManagerV2 {
    caches: IndexMap<Tokens, CacheElement>,
    paged_recurrent_caches: IndexMap<Vec<BlockHash>, Vec<RecurrentStateSnapshot>>,
    n_on_device: usize,
    no_prefix_cache: bool,
    has_paged_attention: bool,
    /// cowork patch: see `PREFIX_CACHE_CPU_BUDGET_BYTES`.
    cpu_budget_bytes: usize,
    /// cowork patch: see `PREFIX_CACHE_CPU_POSITIONS`; with `per_position_bytes`, the
    /// newest entry's, the budget is at least that many of the model's positions.
    cpu_min_positions: usize,
    per_position_bytes: usize,
}

/// cowork patch: on the CPU, `evict_caches` never evicts (it counts only entries on an
/// accelerator), so every finished sequence's cache stayed in memory for the engine's life.
/// Entries beyond this many bytes of keys and values are dropped, least recently used first;
/// the newest entry always stays, so a follow-up can reuse the turn before it.
pub const PREFIX_CACHE_CPU_BUDGET_BYTES: usize = 64 << 20;

/// cowork patch: at least this many positions of keys and values are kept, whatever the
/// model's bytes per position: 64 MiB held one 1,100-position prompt of a 1.5B model
/// (57 KB a position), so a background summary or an agent step evicted the prompt head
/// every question shares and the next question prefilled it again (15–20 s). Two prompts
/// of 1,280 positions fit: the head and one other.
pub const PREFIX_CACHE_CPU_POSITIONS: usize = 2_560;

#[derive(Clone)]
pub enum MatchingCache {
    Normal {
        normal: Vec<Option<KvCache>>,
        recurrent_snapshots: Option<Vec<RecurrentStateSnapshot>>,
        images_to_keep: usize,
        audios_to_keep: usize,
        videos_to_keep: usize,
        toks: Vec<u32>,
        offset: usize,
    },
}

impl PrefixCacheManagerV2 {
    pub fn new(n_on_device: usize, no_prefix_cache: bool, has_paged_attention: bool) -> Self {
        if !no_prefix_cache && !has_paged_attention {
            info!("Prefix caching enabled (sequence-level, non-paged attention). Expect higher multi-turn throughput for both text and multimodal.");
        }
        PrefixCacheManagerV2 {
            caches: IndexMap::new(),
            paged_recurrent_caches: IndexMap::new(),
            n_on_device,
            no_prefix_cache,
            has_paged_attention,
            cpu_budget_bytes: PREFIX_CACHE_CPU_BUDGET_BYTES,
            cpu_min_positions: PREFIX_CACHE_CPU_POSITIONS,
            per_position_bytes: 0,
        }
    }

    fn paged_recurrent_capacity(&self) -> usize {
        self.n_on_device.max(1).saturating_mul(8)
    }

    /// This always keeps the cache on the device.
    pub fn add_sequence(
        &mut self,
        seq: &mut Sequence,
        recurrent_snapshots: Option<Vec<RecurrentStateSnapshot>>,
    ) {
        // Do not cache if prefix caching disabled
        if self.no_prefix_cache {
            return;
        }

        // For paged attention, prefix caching is handled by the KVCacheManager.
        // PrefixCacheManagerV2 only handles non-paged attention caching.
        if !self.has_paged_attention {
            let cache = seq.normal_cache().to_vec();
            let element = CacheElement {
                cache,
                recurrent_snapshots,
                image_hashes: seq.image_hashes().map(|x| x.to_vec()),
                audio_hashes: seq.audio_hashes().map(|x| x.to_vec()),
                video_hashes: seq.video_hashes().map(|x| x.to_vec()),
            };
            self.insert_within_budget(seq.get_toks().to_vec().into(), element);
        }
    }

    /// cowork patch: insert an entry, drop the entries it makes useless, and keep the rest
    /// within `PREFIX_CACHE_CPU_BUDGET_BYTES`.
    fn insert_within_budget(&mut self, toks: Tokens, element: CacheElement) {
        let element = element.trimmed();
        // An entry whose tokens begin the new entry's, with no more computed positions, can
        // never give a longer match than the new one: for any prompt, the common prefix with
        // the new tokens is at least as long. (Entries with images or audio are left alone:
        // their matches also depend on the media hashes.)
        if let (false, Some(new_len)) = (element.has_media(), element.kv_len()) {
            self.caches.retain(|old_toks, old| {
                old.has_media()
                    || old.recurrent_snapshots.is_some()
                    || !toks.0.starts_with(&old_toks.0)
                    || old.kv_len().is_none_or(|old_len| old_len > new_len)
            });
        }
        // The model's bytes per position (an entry's storage may hold up to a third more
        // positions than it computed, see `trimmed`).
        if let Some(len) = element.kv_len().filter(|len| *len > 0) {
            self.per_position_bytes = element.kv_bytes() / len;
        }
        let budget = self.cpu_budget_bytes.max(self.per_position_bytes.saturating_mul(self.cpu_min_positions));
        self.caches.shift_remove(&toks);
        self.caches.insert(toks, element);
        let mut total: usize = self.caches.values().map(CacheElement::kv_bytes).sum();
        while total > budget && self.caches.len() > 1 {
            if let Some((_, oldest)) = self.caches.shift_remove_index(0) {
                total -= oldest.kv_bytes();
            }
        }
    }

    /// Evict the caches. This will evict the first k seqs such that the number of sequences on device after the copy is
    /// the maximum allowed. Returns the number of evicted sequences.
    pub fn evict_caches(&mut self) -> Result<usize> {
        if self.no_prefix_cache {
            return Ok(0);
        }
        let mut n_on_device = 0;
        for cache in self.caches.values() {
            let first_non_none = cache
                .cache
                .iter()
                .find_or_first(|x| x.as_ref().is_some_and(|kv| kv.k().ok().flatten().is_some()));
            let Some(Some(first_non_none)) = first_non_none else {
                continue;
            };

            let cache_device = match first_non_none {
                KvCache::Normal { k, .. } => {
                    k.all_data().as_ref().expect("No KV cache data").device()
                }
                KvCache::Rotating { k, .. } => {
                    k.all_data().as_ref().expect("No KV cache data").device()
                }
                KvCache::Shared { .. } => continue,
            };

            if !matches!(cache_device, Device::Cpu) {
                n_on_device += 1;
            }
        }
        let mut n_evicted = 0;
        // Intentionally evict the first ones first, as they are the oldest
        for cache in self.caches.values_mut() {
            if n_on_device - n_evicted <= self.n_on_device {
                break;
            }
            let first_non_none = cache
                .cache
                .iter()
                .find_or_first(|x| x.as_ref().is_some_and(|kv| kv.k().ok().flatten().is_some()));
            let Some(Some(first_non_none)) = first_non_none else {
                continue;
            };

            let cache_device = match first_non_none {
                KvCache::Normal { k, .. } => {
                    k.all_data().as_ref().expect("No KV cache data").device()
                }
                KvCache::Rotating { k, .. } => {
                    k.all_data().as_ref().expect("No KV cache data").device()
                }
                KvCache::Shared { .. } => continue,
            };

            if !matches!(cache_device, Device::Cpu) {
                cache.cache.clear();
                n_evicted += 1;
            }
        }

        self.caches.retain(|_tokens, cache| !cache.cache.is_empty());

        Ok(n_evicted)
    }

    /// Evict all the caches.
    pub fn evict_all_caches(&mut self) -> Result<usize> {
        let len = self.caches.len();
        self.caches.clear();
        self.paged_recurrent_caches.clear();
        Ok(len)
    }

    /// Add a recurrent-state snapshot for a paged-attention block-hash prefix key.
    /// This is used by hybrid models to restore recurrent states alongside paged KV prefix hits.
    pub fn add_paged_recurrent_prefix(
        &mut self,
        key: Vec<BlockHash>,
        snapshots: Vec<RecurrentStateSnapshot>,
    ) {
        if self.no_prefix_cache
            || !self.has_paged_attention
            || key.is_empty()
            || snapshots.is_empty()
        {
            return;
        }

        // Maintain LRU order by reinserting on update.
        let _ = self.paged_recurrent_caches.shift_remove(&key);
        self.paged_recurrent_caches.insert(key, snapshots);

        while self.paged_recurrent_caches.len() > self.paged_recurrent_capacity() {
            let _ = self.paged_recurrent_caches.shift_remove_index(0);
        }
    }

    /// Lookup a recurrent-state snapshot for a paged-attention block-hash prefix key.
    /// Returns a cloned snapshot and updates LRU order.
    pub fn get_paged_recurrent_prefix(
        &mut self,
        key: &[BlockHash],
    ) -> Option<Vec<RecurrentStateSnapshot>> {
        if self.no_prefix_cache || !self.has_paged_attention || key.is_empty() {
            return None;
        }

        let key = key.to_vec();
        let snapshots = self.paged_recurrent_caches.shift_remove(&key)?;
        let out = snapshots.clone();
        self.paged_recurrent_caches.insert(key, snapshots);
        Some(out)
    }

    /// Search for a matching cache given some tokens. Image-containing sequences are now cached too.
    pub fn search_for_matching_cache(
        &mut self,
        toks: &[u32],
        image_hashes: Option<&[u64]>,
        audio_hashes: Option<&[u64]>,
        video_hashes: Option<&[u64]>,
    ) -> Result<Option<MatchingCache>> {
        // Do not search if prefix caching disabled or no tokens
        if self.no_prefix_cache || toks.is_empty() {
            return Ok(None);
        }

        if self.has_paged_attention {
            // For paged attention, prefix caching is handled by the KVCacheManager.
            // PrefixCacheManagerV2 only handles non-paged attention caching.
            return Ok(None);
        }

        let toks = Tokens(toks.to_vec());

        let mut best_match: Option<(usize, usize, usize, usize, usize)> = None;
        for (index, (k, v)) in self.caches.iter().enumerate() {
            // cowork patch: never past the positions the entry has computed (see `kv_len`).
            let match_len = toks
                .shared_prefix_len(k)
                .min(v.kv_len().unwrap_or(usize::MAX));
            if match_len == 0 {
                continue;
            }

            let images_match_until = match image_hashes {
                Some(input_hashes) => match &v.image_hashes {
                    Some(cached_hashes) => input_hashes
                        .iter()
                        .zip(cached_hashes)
                        .take_while(|(a, b)| a == b)
                        .count(),
                    None => 0,
                },
                None => 0,
            };

            let audios_match_until = match audio_hashes {
                Some(input_hashes) => match &v.audio_hashes {
                    Some(cached_hashes) => input_hashes
                        .iter()
                        .zip(cached_hashes)
                        .take_while(|(a, b)| a == b)
                        .count(),
                    None => 0,
                },
                None => 0,
            };

            // Vision/audio models can use repeated placeholder tokens (e.g. <image_soft_token>)
            // that are identical regardless of the actual image/audio content. This means
            // token-level matching can extend through image/audio regions even when the
            // underlying content differs, leaving stale vision/audio encoder outputs in the
            // KV cache. Skip entries where any overlapping images or audios diverge.
            let cached_image_count = v.image_hashes.as_ref().map_or(0, |h| h.len());
            let input_image_count = image_hashes.map_or(0, |h| h.len());
            if images_match_until < input_image_count.min(cached_image_count) {
                continue;
            }

            let cached_audio_count = v.audio_hashes.as_ref().map_or(0, |h| h.len());
            let input_audio_count = audio_hashes.map_or(0, |h| h.len());
            if audios_match_until < input_audio_count.min(cached_audio_count) {
                continue;
            }

            let videos_match_until = match video_hashes {
                Some(input_hashes) => match &v.video_hashes {
                    Some(cached_hashes) => input_hashes
                        .iter()
                        .zip(cached_hashes)
                        .take_while(|(a, b)| a == b)
                        .count(),
                    None => 0,
                },
                None => 0,
            };

            let cached_video_count = v.video_hashes.as_ref().map_or(0, |h| h.len());
            let input_video_count = video_hashes.map_or(0, |h| h.len());
            if videos_match_until < input_video_count.min(cached_video_count) {
                continue;
            }

            // Sliding/rotating caches only retain a fixed tail. If a cache has already
            // truncated older tokens, it can still safely serve an exact extension of the
            // cached prefix, but it cannot be rewound to an earlier logical length. Skip such
            // candidates here so a rolled-over cache does not block a shorter valid prefix hit.
            if !v.can_rewind_to(match_len) {
                continue;
            }

            if best_match
                .as_ref()
                .is_none_or(|(len, _, _, _, _)| match_len > *len)
            {
                best_match = Some((
                    match_len,
                    index,
                    images_match_until,
                    audios_match_until,
                    videos_match_until,
                ));
            }
        }

        if let Some((
            mut match_len,
            index,
            images_match_until,
            audios_match_until,
            videos_match_until,
        )) = best_match
        {
            // cowork patch: a prompt an entry holds whole (the same prompt again: a prompt
            // head prefilled in the background and asked again, a retry) recomputes only its
            // last token, whose logits the next token needs, as llama.cpp does; upstream
            // prefilled it all again.
            if match_len == toks.0.len() && match_len > 1 && self.caches[index].can_rewind_to(match_len - 1) {
                match_len -= 1;
            }
            let new_toks = toks.0[match_len..].to_vec();
            if new_toks.is_empty() {
                return Ok(None);
            }

            // cowork patch: the entry just used is the most recently used (evicted last).
            let last = self.caches.len() - 1;
            self.caches.move_index(index, last);
            let mut cache = self.caches[last].clone();
            // Count how many input images are not already cached
            let images_to_keep = if let Some(input_hashes) = image_hashes {
                input_hashes.len().saturating_sub(images_match_until)
            } else {
                0
            };
            let audios_to_keep = if let Some(input_hashes) = audio_hashes {
                input_hashes.len().saturating_sub(audios_match_until)
            } else {
                0
            };
            let videos_to_keep = if let Some(input_hashes) = video_hashes {
                input_hashes.len().saturating_sub(videos_match_until)
            } else {
                0
            };
            for layer in cache.cache.iter_mut().flatten() {
                if layer.try_set_len(match_len).is_err() {
                    return Ok(None);
                }
            }
            for layer in cache.cache.iter_mut().flatten() {
                layer.set_len(match_len)?;
            }
            return Ok(Some(MatchingCache::Normal {
                normal: cache.cache,
                recurrent_snapshots: cache.recurrent_snapshots,
                images_to_keep,
                audios_to_keep,
                videos_to_keep,
                toks: new_toks,
                offset: match_len,
            }));
        }

        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor};

    use super::{CacheElement, MatchingCache, PrefixCacheManagerV2};
    use crate::kv_cache::{KvCache, RotatingCache, SingleCache};

    fn make_cache_tensor(len: usize) -> candle_core::Result<Tensor> {
        Tensor::zeros((1, 1, len, 1), DType::F32, &Device::Cpu)
    }

    fn make_rotating_kv_cache(
        logical_len: usize,
        sliding_window: usize,
    ) -> candle_core::Result<KvCache> {
        let src = make_cache_tensor(logical_len)?;
        let mut k = RotatingCache::new(2, sliding_window, sliding_window);
        let mut v = RotatingCache::new(2, sliding_window, sliding_window);
        let _ = k.append(&src)?;
        let _ = v.append(&src)?;
        Ok(KvCache::Rotating { k, v })
    }

    fn make_normal_kv_cache(logical_len: usize) -> candle_core::Result<KvCache> {
        let src = make_cache_tensor(logical_len)?;
        let mut k = SingleCache::new(2, logical_len, logical_len);
        let mut v = SingleCache::new(2, logical_len, logical_len);
        k.append(&src)?;
        v.append(&src)?;
        Ok(KvCache::Normal { k, v })
    }

    #[test]
    fn skips_rolled_over_rotating_candidate_that_cannot_rewind() -> candle_core::Result<()> {
        let mut prefix_cacher = PrefixCacheManagerV2::new(1, false, false);

        prefix_cacher.caches.insert(
            vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10].into(),
            CacheElement {
                cache: vec![Some(make_rotating_kv_cache(10, 4)?)],
                recurrent_snapshots: None,
                audio_hashes: None,
                image_hashes: None,
                video_hashes: None,
            },
        );
        prefix_cacher.caches.insert(
            vec![1, 2, 3, 4, 5, 9].into(),
            CacheElement {
                cache: vec![Some(make_normal_kv_cache(6)?)],
                recurrent_snapshots: None,
                audio_hashes: None,
                image_hashes: None,
                video_hashes: None,
            },
        );

        let hit = prefix_cacher.search_for_matching_cache(
            &[1, 2, 3, 4, 5, 6, 7, 99],
            None,
            None,
            None,
        )?;

        match hit {
            Some(MatchingCache::Normal { toks, offset, .. }) => {
                assert_eq!(offset, 5);
                assert_eq!(toks, vec![6, 7, 99]);
            }
            None => panic!("expected a shorter valid prefix-cache hit"),
        }

        Ok(())
    }

    #[test]
    fn allows_exact_extension_from_rolled_over_rotating_cache() -> candle_core::Result<()> {
        let mut prefix_cacher = PrefixCacheManagerV2::new(1, false, false);

        prefix_cacher.caches.insert(
            vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10].into(),
            CacheElement {
                cache: vec![Some(make_rotating_kv_cache(10, 4)?)],
                recurrent_snapshots: None,
                audio_hashes: None,
                image_hashes: None,
                video_hashes: None,
            },
        );

        let hit = prefix_cacher.search_for_matching_cache(
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
            None,
            None,
            None,
        )?;

        match hit {
            Some(MatchingCache::Normal { toks, offset, .. }) => {
                assert_eq!(offset, 10);
                assert_eq!(toks, vec![11]);
            }
            None => panic!("expected exact-extension prefix-cache hit"),
        }

        Ok(())
    }

    // cowork patch tests.
    fn normal_element(kv_len: usize) -> candle_core::Result<CacheElement> {
        Ok(CacheElement {
            cache: vec![Some(make_normal_kv_cache(kv_len)?)],
            recurrent_snapshots: None,
            audio_hashes: None,
            image_hashes: None,
            video_hashes: None,
        })
    }

    #[test]
    fn match_stops_where_the_cached_keys_end() -> candle_core::Result<()> {
        let mut prefix_cacher = PrefixCacheManagerV2::new(1, false, false);
        // A finished sequence: five tokens, the last one sampled and never fed, so four
        // positions of keys and values.
        prefix_cacher.insert_within_budget(vec![1, 2, 3, 4, 5].into(), normal_element(4)?);
        match prefix_cacher.search_for_matching_cache(&[1, 2, 3, 4, 5, 6, 7], None, None, None)? {
            Some(MatchingCache::Normal {
                toks,
                offset,
                normal,
                ..
            }) => {
                assert_eq!(offset, 4);
                assert_eq!(toks, vec![5, 6, 7]);
                assert_eq!(normal[0].as_ref().unwrap().current_seq_len(), 4);
            }
            _ => panic!("expected a prefix-cache hit"),
        }
        Ok(())
    }

    #[test]
    fn a_prompt_held_whole_recomputes_only_its_last_token() -> candle_core::Result<()> {
        let mut prefix_cacher = PrefixCacheManagerV2::new(1, false, false);
        // A prompt head prefilled in the background: five prompt tokens computed, one sampled.
        prefix_cacher.insert_within_budget(vec![1, 2, 3, 4, 5, 6].into(), normal_element(5)?);
        // The same head again (nothing changed since): upstream found no match and
        // prefilled all five; now only the last is fed again, for its logits.
        match prefix_cacher.search_for_matching_cache(&[1, 2, 3, 4, 5], None, None, None)? {
            Some(MatchingCache::Normal { toks, offset, normal, .. }) => {
                assert_eq!((offset, toks), (4, vec![5]));
                assert_eq!(normal[0].as_ref().unwrap().current_seq_len(), 4);
            }
            _ => panic!("expected a prefix-cache hit"),
        }
        // One token has nothing before it to reuse.
        prefix_cacher.insert_within_budget(vec![8, 9].into(), normal_element(1)?);
        assert!(prefix_cacher.search_for_matching_cache(&[8], None, None, None)?.is_none());
        Ok(())
    }

    #[test]
    fn the_budget_holds_two_prompt_heads_of_a_model_with_wide_positions() -> candle_core::Result<()> {
        let mut prefix_cacher = PrefixCacheManagerV2::new(1, false, false);
        // 64 KiB a position (a 1.5B model holds 57 KB): 1,000 positions are 64 MB, so two
        // prompts were over 64 MiB and a summary's prompt evicted the head.
        let wide = |len: usize| -> candle_core::Result<CacheElement> {
            let src = Tensor::zeros((1, 1, len, 8_192), DType::F32, &Device::Cpu)?;
            let mut k = SingleCache::new(2, len, len);
            let mut v = SingleCache::new(2, len, len);
            k.append(&src)?;
            v.append(&src)?;
            Ok(CacheElement { cache: vec![Some(KvCache::Normal { k, v })], recurrent_snapshots: None, audio_hashes: None, image_hashes: None, video_hashes: None })
        };
        prefix_cacher.insert_within_budget(vec![1; 1_001].into(), wide(1_000)?);
        prefix_cacher.insert_within_budget(vec![2; 1_001].into(), wide(1_000)?);
        assert_eq!(prefix_cacher.caches.len(), 2, "the head and one other prompt");
        prefix_cacher.insert_within_budget(vec![3; 1_001].into(), wide(1_000)?);
        let keys: Vec<u32> = prefix_cacher.caches.keys().map(|k| k.0[0]).collect();
        assert_eq!(keys, vec![2, 3], "and no more: 2,560 positions");
        Ok(())
    }

    #[test]
    fn entries_a_newer_one_extends_are_dropped() -> candle_core::Result<()> {
        let mut prefix_cacher = PrefixCacheManagerV2::new(1, false, false);
        prefix_cacher.insert_within_budget(vec![1, 2, 3].into(), normal_element(2)?);
        prefix_cacher.insert_within_budget(vec![1, 2, 9].into(), normal_element(2)?);
        prefix_cacher.insert_within_budget(vec![1, 2, 3, 4, 5].into(), normal_element(4)?);
        let keys: Vec<Vec<u32>> = prefix_cacher.caches.keys().map(|k| k.0.clone()).collect();
        assert_eq!(keys, vec![vec![1, 2, 9], vec![1, 2, 3, 4, 5]]);
        Ok(())
    }

    #[test]
    fn an_entry_keeps_only_the_positions_it_holds() -> candle_core::Result<()> {
        let mut prefix_cacher = PrefixCacheManagerV2::new(1, false, false);
        // Two heads of width 2: the cut runs along the sequence, inside each head.
        let cache = |len: usize, capacity: usize| -> candle_core::Result<(CacheElement, Tensor)> {
            let values: Vec<f32> = (0..2 * len * 2).map(|i| i as f32).collect();
            let src = Tensor::from_vec(values, (1, 2, len, 2), &Device::Cpu)?;
            let mut k = SingleCache::new(2, 4096, capacity);
            let mut v = SingleCache::new(2, 4096, capacity);
            k.append(&src)?;
            v.append(&src)?;
            let element = CacheElement {
                cache: vec![Some(KvCache::Normal { k, v })],
                recurrent_snapshots: None,
                audio_hashes: None,
                image_hashes: None,
                video_hashes: None,
            };
            Ok((element, src))
        };
        let (short, src) = cache(216, 512)?;
        let buffer = match &short.cache[0] {
            Some(KvCache::Normal { k, .. }) => k.all_data().unwrap().clone(),
            _ => unreachable!(),
        };
        prefix_cacher.insert_within_budget(vec![1; 217].into(), short);
        let (long, _) = cache(450, 512)?;
        prefix_cacher.insert_within_budget(vec![2; 451].into(), long);
        let layers: Vec<&KvCache> = prefix_cacher
            .caches
            .values()
            .map(|e| e.cache[0].as_ref().unwrap())
            .collect();
        let KvCache::Normal { k, v } = layers[0] else {
            unreachable!()
        };
        assert_eq!(k.all_data().unwrap().dims(), &[1, 2, 216, 2]);
        assert!(!k.all_data().unwrap().same_storage(&buffer));
        assert_eq!(v.capacity_seq_len, 216);
        let diff = (k.current_data()?.unwrap() - &src)?.abs()?.sum_all()?;
        assert_eq!(diff.to_scalar::<f32>()?, 0.0, "the same keys, head by head");
        assert_eq!(
            prefix_cacher.caches.values().next().unwrap().kv_bytes(),
            2 * 2 * 216 * 2 * 4
        );
        // 450 of 512 positions: the buffer is kept, not copied.
        let KvCache::Normal { k, .. } = layers[1] else {
            unreachable!()
        };
        assert_eq!(k.all_data().unwrap().dims(), &[1, 2, 512, 2]);
        Ok(())
    }

    #[test]
    fn cpu_entries_stay_within_the_budget_least_recently_used_first() -> candle_core::Result<()> {
        let mut prefix_cacher = PrefixCacheManagerV2::new(1, false, false);
        // Each entry holds 100 positions of F32 keys and values: 800 bytes.
        prefix_cacher.cpu_budget_bytes = 2_000;
        prefix_cacher.cpu_min_positions = 0;
        prefix_cacher.insert_within_budget(vec![1, 1].into(), normal_element(100)?);
        prefix_cacher.insert_within_budget(vec![2, 2].into(), normal_element(100)?);
        // A hit makes [1, 1] the most recently used, so [2, 2] goes first.
        assert!(prefix_cacher
            .search_for_matching_cache(&[1, 1, 7], None, None, None)?
            .is_some());
        prefix_cacher.insert_within_budget(vec![3, 3].into(), normal_element(100)?);
        let keys: Vec<Vec<u32>> = prefix_cacher.caches.keys().map(|k| k.0.clone()).collect();
        assert_eq!(keys, vec![vec![1, 1], vec![3, 3]]);
        // The newest entry stays even when it alone is over the budget.
        prefix_cacher.cpu_budget_bytes = 10;
        prefix_cacher.insert_within_budget(vec![4, 4].into(), normal_element(100)?);
        let keys: Vec<Vec<u32>> = prefix_cacher.caches.keys().map(|k| k.0.clone()).collect();
        assert_eq!(keys, vec![vec![4, 4]]);
        Ok(())
    }
}
