//! Subscription regexes, compiled once and matched again only when the topics change.
//!
//! A member that subscribes with `SubscribedTopicRegex` repeats the regex in every full
//! heartbeat, and every heartbeat of such a group used to compile it and match it against every
//! topic. What a regex resolves to is a pure function of the regex and the topic set, and the
//! topic registry publishes a new [`TopicsSnapshot`] for every change, so this cache keeps each
//! regex's compiled form with the snapshot it was last matched against: the same snapshot gives
//! the same topics without a single match. Kafka resolves regexes off the request path and at
//! most every 10 s (`GroupMetadataManager.maybeUpdateRegularExpressions`); here resolution stays
//! on the path but costs a lookup unless topics were created or deleted, so a new topic is seen
//! at the next heartbeat, as before.

use crate::topics::TopicsSnapshot;
use std::sync::Arc;

/// How many distinct regexes one partition's coordinator remembers; past it the cache starts
/// over (the entries are cheap to rebuild, an unbounded map is not).
const MAX_ENTRIES: usize = 1024;

#[derive(Debug, Clone, Default)]
pub struct RegexCache {
    entries: hashbrown::HashMap<Box<str>, Entry>,
    /// Compilations and full matches done (a measure for tests and benchmarks).
    pub matches: u64,
}

#[derive(Debug, Clone)]
struct Entry {
    compiled: regex::Regex,
    /// The snapshot `topics` was matched against; held so its identity cannot be reused.
    against: Arc<TopicsSnapshot>,
    topics: Arc<[String]>,
}

impl RegexCache {
    /// The non-internal topics of `snapshot` whose whole name `re` matches, sorted; or why `re`
    /// is not a valid regular expression.
    pub fn resolve(
        &mut self,
        re: &str,
        snapshot: &Arc<TopicsSnapshot>,
    ) -> Result<Arc<[String]>, String> {
        if let Some(e) = self.entries.get_mut(re) {
            if !Arc::ptr_eq(&e.against, snapshot) {
                e.topics = matching(&e.compiled, snapshot);
                e.against = snapshot.clone();
                self.matches += 1;
            }
            return Ok(e.topics.clone());
        }
        let compiled = compile(re)?;
        let topics = matching(&compiled, snapshot);
        self.matches += 1;
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.clear();
        }
        self.entries.insert(
            re.into(),
            Entry {
                compiled,
                against: snapshot.clone(),
                topics: topics.clone(),
            },
        );
        Ok(topics)
    }
}

/// The full regular expression check: compiled with Rust's `regex` (RE2 syntax, like RE2/J),
/// anchored at both ends as Kafka's `Pattern.matcher(topic).matches()`.
pub fn compile(re: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(&format!("^(?:{re})$")).map_err(|e| e.to_string())
}

fn matching(compiled: &regex::Regex, snapshot: &TopicsSnapshot) -> Arc<[String]> {
    // `iter` walks topics by name, so the result is sorted.
    let topics: Vec<String> = snapshot
        .iter()
        .filter(|t| !t.internal && compiled.is_match(&t.name))
        .map(|t| t.name.clone())
        .collect();
    debug_assert!(topics.windows(2).all(|w| w[0] < w[1]));
    topics.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topics::Topic;

    fn snapshot(names: &[&str]) -> Arc<TopicsSnapshot> {
        Arc::new(TopicsSnapshot::from_topics(names.iter().enumerate().map(
            |(i, n)| Topic {
                name: n.to_string(),
                id: uuid::Uuid::from_u128(i as u128 + 1),
                partitions: 1,
                internal: false,
                configs: Default::default(),
                replication_factor: 1,
            },
        )))
    }

    #[test]
    fn a_regex_is_matched_again_only_for_a_new_snapshot() {
        let mut cache = RegexCache::default();
        let s1 = snapshot(&["orders-eu", "orders-us", "payments"]);
        let got = cache.resolve("orders-.*", &s1).unwrap();
        assert_eq!(&*got, ["orders-eu", "orders-us"]);
        assert_eq!(cache.matches, 1);
        for _ in 0..100 {
            assert_eq!(cache.resolve("orders-.*", &s1).unwrap(), got);
        }
        assert_eq!(cache.matches, 1, "the same snapshot needs no match");
        let s2 = snapshot(&["orders-ap", "orders-eu", "orders-us", "payments"]);
        assert_eq!(
            &*cache.resolve("orders-.*", &s2).unwrap(),
            ["orders-ap", "orders-eu", "orders-us"]
        );
        assert_eq!(cache.matches, 2);
    }

    #[test]
    fn matches_are_anchored_and_invalid_regexes_are_errors() {
        let mut cache = RegexCache::default();
        let s = snapshot(&["a", "ab", "xab"]);
        assert_eq!(&*cache.resolve("ab", &s).unwrap(), ["ab"]);
        assert_eq!(&*cache.resolve("a|ab", &s).unwrap(), ["a", "ab"]);
        assert!(cache.resolve("(", &s).is_err());
        assert!(
            cache.resolve("(", &s).is_err(),
            "an invalid regex is never cached as valid"
        );
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut cache = RegexCache::default();
        let s = snapshot(&["t"]);
        for i in 0..(MAX_ENTRIES * 2 + 7) {
            cache.resolve(&format!("t{i}|t"), &s).unwrap();
            assert!(cache.entries.len() <= MAX_ENTRIES);
        }
    }
}
