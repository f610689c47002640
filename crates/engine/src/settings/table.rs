//! What is swept, defined once for `precise-ttl run` and the Lambda: the table, its layout (TTL
//! and shard attributes, index name, shard count), which index lists the due items
//! (`index-layout`, with the stream-queue layout's queue table and its default name) and how
//! deletes are sent (`delete-mode`). Each value's name, default and meaning (the flag's help and
//! its possible values' help) and parser live here; the command line offers the same values
//! through clap and the Lambda reads them through [`super::RunSettings::from_lookup`].

use super::{Invalid, Setting};
use precise_ttl_core::{LayoutError, ShardCount, ShardCountError, TtlLayout};
use thiserror::Error;

pub const TABLE: Setting = Setting {
    name: "table",
    default: None,
    meaning: "The DynamoDB table to work on",
};
pub const INDEX_LAYOUT: Setting = Setting {
    name: "index-layout",
    default: Some("sharded"),
    meaning: "Which index lists the due items: sharded (ours: writers add the shard attribute, `setup` adds the index), stream-queue (writers unchanged: precise-ttl's queue table, fed from the table's stream; docs/adoption.md) or blog-window (the 2022 blog's expirationWindow index as it stands, named by --index-name)",
};
pub const QUEUE_TABLE: Setting = Setting {
    name: "queue-table",
    default: None,
    meaning: "stream-queue: precise-ttl's queue table (default: <table>-precise-ttl-queue)",
};

/// The default name of the queue table of `table` (the stream-queue layout's).
pub fn default_queue_table(table: &str) -> String {
    format!("{table}-precise-ttl-queue")
}

/// The queue table of `table`: the one `queue-table` names, else the default.
pub fn queue_table(given: Option<&str>, table: &str) -> String {
    given.map_or_else(|| default_queue_table(table), str::to_string)
}

/// Why the layout's settings make no layout: the core's own refusals, said as they are.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LayoutInvalid {
    #[error(transparent)]
    Shards(#[from] ShardCountError),
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

/// The table's layout from its four settings (`ttl-attribute`, `shard-attribute`, `index-name`,
/// `shards`, each already through its parser).
pub fn ttl_layout(
    ttl_attribute: &str,
    shard_attribute: &str,
    index_name: &str,
    shards: u64,
) -> Result<TtlLayout, LayoutInvalid> {
    Ok(TtlLayout::new(
        ttl_attribute,
        shard_attribute,
        index_name,
        ShardCount::new(shards)?,
    )?)
}

/// A setting whose value is one of a few names, each with a line of help.
pub trait Choice: Copy + Sized + 'static {
    /// Every value, in the order help lists them.
    const ALL: &'static [Self];
    /// The value as users write it.
    fn name(self) -> &'static str;
    /// One line saying what the value does (its line under the flag's possible values).
    fn meaning(self) -> &'static str;

    /// The value named `s`, or why none is.
    fn parse(s: &str) -> Result<Self, Invalid> {
        Self::ALL
            .iter()
            .copied()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|v| v.name()).collect();
                let (last, rest) = names.split_last().expect("a choice has values");
                Invalid(format!("{s:?} is not {} or {last}", rest.join(", ")))
            })
    }
}

/// Which index lists the due items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexLayout {
    /// Ours: a sparse index on (shard Number, TTL); writers add the shard attribute.
    Sharded,
    /// Writers unchanged: precise-ttl's queue table, fed from the table's stream.
    StreamQueue,
    /// The 2022 blog's: an index on (expirationWindow String, TTL).
    BlogWindow,
}

impl Choice for IndexLayout {
    const ALL: &'static [Self] = &[Self::Sharded, Self::StreamQueue, Self::BlogWindow];

    fn name(self) -> &'static str {
        match self {
            IndexLayout::Sharded => "sharded",
            IndexLayout::StreamQueue => "stream-queue",
            IndexLayout::BlogWindow => "blog-window",
        }
    }

    fn meaning(self) -> &'static str {
        match self {
            IndexLayout::Sharded => {
                "Ours: a sparse index on (shard Number, TTL); writers add the shard attribute"
            }
            IndexLayout::StreamQueue => {
                "Writers unchanged: precise-ttl's queue table, fed from the table's stream"
            }
            IndexLayout::BlogWindow => {
                "The 2022 blog's: an index on (expirationWindow String, TTL)"
            }
        }
    }
}

impl IndexLayout {
    /// The value as users write it (for messages).
    pub fn name(self) -> &'static str {
        Choice::name(self)
    }
}

/// What the daemon reads, the stream-queue layout's queue table resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Index {
    /// The shard index.
    Sharded,
    /// The expiry queue's table.
    StreamQueue { queue_table: String },
    /// The 2022 blog's window index (its own settings are the command line's).
    BlogWindow,
}

impl Index {
    /// The index `layout` reads for `table`; `queue-table` (`given`) counts under stream-queue
    /// only, and is ignored otherwise, as one config file may serve several layouts' commands.
    pub fn of(layout: IndexLayout, given_queue_table: Option<&str>, table: &str) -> Index {
        match layout {
            IndexLayout::Sharded => Index::Sharded,
            IndexLayout::StreamQueue => Index::StreamQueue {
                queue_table: queue_table(given_queue_table, table),
            },
            IndexLayout::BlogWindow => Index::BlogWindow,
        }
    }
}

/// How deletes are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteMode {
    /// One conditional `DeleteItem` per item.
    Single,
    /// PartiQL `BatchExecuteStatement`: up to 25 conditional `DELETE`s per request, each with
    /// its own outcome. Same write capacity per item; fewer requests when many are due at once.
    Batch,
    /// `Batch`, until the store refuses PartiQL for good: access denied (a role with
    /// `dynamodb:DeleteItem` but not `dynamodb:PartiQLDelete`), a validation error, or an
    /// implementation without PartiQL that answers 5xx to every batch while `DeleteItem` works.
    /// Then `Single` for the rest of the process, said once in the log and in a metric.
    Auto,
}

impl Choice for DeleteMode {
    const ALL: &'static [Self] = &[Self::Single, Self::Batch, Self::Auto];

    fn name(self) -> &'static str {
        match self {
            DeleteMode::Single => "single",
            DeleteMode::Batch => "batch",
            DeleteMode::Auto => "auto",
        }
    }

    fn meaning(self) -> &'static str {
        match self {
            DeleteMode::Single => "One conditional DeleteItem per item (needs dynamodb:DeleteItem)",
            DeleteMode::Batch => {
                "PartiQL batches only (needs dynamodb:PartiQLDelete); a store that refuses them stops the daemon"
            }
            DeleteMode::Auto => {
                "Batches, and DeleteItem for good once the store refuses PartiQL (access denied, no PartiQL support)"
            }
        }
    }
}

impl DeleteMode {
    /// The value as users write it (for messages and reports).
    pub fn name(self) -> &'static str {
        Choice::name(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_their_names_and_refuse_others_in_one_line() {
        for &layout in IndexLayout::ALL {
            assert_eq!(IndexLayout::parse(layout.name()), Ok(layout));
        }
        for &mode in DeleteMode::ALL {
            assert_eq!(DeleteMode::parse(mode.name()), Ok(mode));
        }
        assert_eq!(
            DeleteMode::parse("fast").unwrap_err().0,
            "\"fast\" is not single, batch or auto"
        );
        let e = IndexLayout::parse("Stream-Queue").unwrap_err().0;
        assert_eq!(
            e,
            "\"Stream-Queue\" is not sharded, stream-queue or blog-window"
        );
        assert_eq!(
            IndexLayout::parse(INDEX_LAYOUT.default.unwrap()),
            Ok(IndexLayout::Sharded)
        );
        assert_eq!(
            super::super::DELETE_MODE.default.map(DeleteMode::parse),
            Some(Ok(DeleteMode::Auto))
        );
    }

    #[test]
    fn the_queue_table_counts_under_its_layout_only() {
        assert_eq!(
            Index::of(IndexLayout::StreamQueue, None, "t"),
            Index::StreamQueue {
                queue_table: "t-precise-ttl-queue".into()
            }
        );
        assert_eq!(
            Index::of(IndexLayout::StreamQueue, Some("q"), "t"),
            Index::StreamQueue {
                queue_table: "q".into()
            }
        );
        assert_eq!(
            Index::of(IndexLayout::Sharded, Some("q"), "t"),
            Index::Sharded
        );
    }

    #[test]
    fn layout_errors_are_the_core_s() {
        assert!(ttl_layout("ttl", "ttl_shard", "precise-ttl", 16).is_ok());
        let e = ttl_layout("ttl", "ttl", "precise-ttl", 16).unwrap_err();
        assert!(matches!(e, LayoutInvalid::Layout(_)), "{e}");
        let e = ttl_layout("ttl", "s", "precise-ttl", 0).unwrap_err();
        assert!(matches!(e, LayoutInvalid::Shards(_)), "{e}");
    }
}
