//! Rows of counters keyed by one label value (a tool's or a provider's name).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// Rows of `T` by name: found under a read lock, created once under the write lock.
#[derive(Debug, Default)]
pub(super) struct Family<T> {
    rows: RwLock<BTreeMap<String, Arc<T>>>,
}

impl<T: Default> Family<T> {
    /// The row of `name`, created with zeros the first time.
    pub(super) fn row(&self, name: &str) -> Arc<T> {
        self.row_capped(name, usize::MAX, name)
    }

    /// The row of `name`, as [`Family::row`], while the family has fewer than `cap`
    /// rows; past that, a name it does not hold yet gets the row of `overflow`
    /// instead (for labels a tool's payload chooses: a tool cannot grow the series
    /// without bound).
    pub(super) fn row_capped(&self, name: &str, cap: usize, overflow: &str) -> Arc<T> {
        {
            let rows = self.rows.read().unwrap_or_else(|p| p.into_inner());
            if let Some(row) = rows.get(name) {
                return Arc::clone(row);
            }
        }
        let mut rows = self.rows.write().unwrap_or_else(|p| p.into_inner());
        let name = if rows.len() >= cap && !rows.contains_key(name) {
            overflow
        } else {
            name
        };
        Arc::clone(rows.entry(name.to_owned()).or_default())
    }

    /// Every row, by name.
    pub(super) fn rows(&self) -> Vec<(String, Arc<T>)> {
        let rows = self.rows.read().unwrap_or_else(|p| p.into_inner());
        rows.iter()
            .map(|(name, row)| (name.clone(), Arc::clone(row)))
            .collect()
    }
}
