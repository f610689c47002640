//! The deletion log: every delete's commit time and key, kept compactly (a time, a table
//! number and an offset per delete, the keys' text in one buffer), so a bench can measure lag
//! on millions of deletes without a stream.

use serde::Serialize;

/// One delete.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deletion {
    /// When it committed: Unix time in milliseconds.
    pub at_ms: f64,
    pub table: String,
    /// The partition key as text (a String as is, a Number's canonical text, a Binary in base64).
    pub key: String,
    /// The sort key as text, for tables that have one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort: Option<String>,
}

/// Separates the partition key's text from the sort key's in the buffer.
const SORT_SEPARATOR: char = '\u{0}';

#[derive(Debug, Default)]
pub struct DeletionLog {
    times: Vec<f64>,
    tables: Vec<u16>,
    ends: Vec<u64>,
    keys: String,
    table_names: Vec<String>,
}

impl DeletionLog {
    pub fn record(&mut self, at_ms: f64, table: &str, key: &str, sort: Option<&str>) {
        let table = match self.table_names.iter().position(|t| t == table) {
            Some(i) => i,
            None => {
                self.table_names.push(table.to_string());
                self.table_names.len() - 1
            }
        };
        self.times.push(at_ms);
        self.tables.push(u16::try_from(table).unwrap_or(u16::MAX));
        self.keys.push_str(key);
        if let Some(sort) = sort {
            self.keys.push(SORT_SEPARATOR);
            self.keys.push_str(sort);
        }
        self.ends.push(self.keys.len() as u64);
    }

    pub fn len(&self) -> usize {
        self.times.len()
    }

    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// Deletions `from..from + limit`, oldest first.
    pub fn slice(&self, from: usize, limit: usize) -> Vec<Deletion> {
        let to = from.saturating_add(limit).min(self.len());
        (from.min(to)..to).map(|i| self.get(i)).collect()
    }

    fn get(&self, i: usize) -> Deletion {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        let text = &self.keys[start..self.ends[i] as usize];
        let (key, sort) = match text.split_once(SORT_SEPARATOR) {
            Some((k, s)) => (k.to_string(), Some(s.to_string())),
            None => (text.to_string(), None),
        };
        Deletion {
            at_ms: self.times[i],
            table: self
                .table_names
                .get(usize::from(self.tables[i]))
                .cloned()
                .unwrap_or_default(),
            key,
            sort,
        }
    }

    /// Bytes held, roughly.
    pub fn bytes(&self) -> usize {
        self.times.capacity() * 8
            + self.tables.capacity() * 2
            + self.ends.capacity() * 8
            + self.keys.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_reads_back_in_order() {
        let mut log = DeletionLog::default();
        log.record(1.5, "t", "a", None);
        log.record(2.5, "u", "b", Some("s"));
        log.record(3.5, "t", "c", None);
        assert_eq!(log.len(), 3);
        let all = log.slice(0, 10);
        assert_eq!(all[1].table, "u");
        assert_eq!(all[1].key, "b");
        assert_eq!(all[1].sort.as_deref(), Some("s"));
        assert_eq!(all[2].key, "c");
        assert_eq!(log.slice(2, 10).len(), 1);
        assert!(log.slice(5, 10).is_empty());
    }
}
