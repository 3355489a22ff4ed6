//! A map that holds at most a fixed number of entries, evicting the least recently used: the
//! bound on every in-memory cache (programs, schedules, BEAM results), so a long process that
//! keeps building new graphs does not grow without limit.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

/// At most `capacity` entries; a lookup marks its entry used, an insert past the bound drops
/// the entry used longest ago.
pub struct Lru<K, V, S = std::collections::hash_map::RandomState> {
    entries: HashMap<K, (V, u64), S>,
    capacity: usize,
    clock: u64,
}

impl<K: Hash + Eq, V, S: BuildHasher + Default> Lru<K, V, S> {
    pub fn new(capacity: usize) -> Self {
        Lru { entries: HashMap::default(), capacity: capacity.max(1), clock: 0 }
    }
    pub fn get(&mut self, key: &K) -> Option<&V> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(key).map(|(v, used)| {
            *used = clock;
            &*v
        })
    }
    pub fn contains_key(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }
    pub fn insert(&mut self, key: K, value: V) {
        self.clock += 1;
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            // a scan per eviction: caches are thousands of entries, inserts follow compiles; each
            // entry's tick is its own, so one entry goes
            if let Some(oldest) = self.entries.values().map(|(_, used)| *used).min() {
                self.entries.retain(|_, (_, used)| *used != oldest);
            }
        }
        self.entries.insert(key, (value, self.clock));
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<K: Hash + Eq, V, S: BuildHasher + Default> Default for Lru<K, V, S> {
    /// Room for 4096 entries.
    fn default() -> Self {
        Lru::new(4096)
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn holds_at_most_its_capacity_and_drops_the_least_recently_used() {
        let mut lru: Lru<u32, &str> = Lru::new(2);
        lru.insert(1, "a");
        lru.insert(2, "b");
        assert_eq!(lru.get(&1), Some(&"a"));
        lru.insert(3, "c");
        assert_eq!(lru.len(), 2);
        assert_eq!(lru.get(&2), None, "2 was used longest ago");
        assert_eq!((lru.get(&1).copied(), lru.get(&3).copied()), (Some("a"), Some("c")));
        lru.insert(3, "d");
        assert_eq!((lru.len(), lru.get(&3).copied(), lru.contains_key(&1)), (2, Some("d"), true));
    }
}
