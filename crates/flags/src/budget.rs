//! `run`'s capacity budget: how much of the table's write capacity a catch-up may take. The
//! values, defaults and ranges are `precise_ttl_engine::settings`' (the Lambda reads the same).

use super::{heading, long_help};
use clap::Args;
use precise_ttl_engine::settings;

/// The share of the table's write capacity the backlog may use, or none (`off`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetShare(pub Option<f64>);

impl std::fmt::Display for BudgetShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(share) => write!(f, "{share}"),
            None => f.write_str("off"),
        }
    }
}

impl std::str::FromStr for BudgetShare {
    type Err = settings::Invalid;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        settings::backlog_budget(s).map(BudgetShare)
    }
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = heading::BUDGET)]
pub struct CapacityBudget {
    #[arg(long, env = "PRECISE_TTL_BACKLOG_BUDGET", value_name = "SHARE|off",
          default_value = settings::BACKLOG_BUDGET.default,
          help = settings::BACKLOG_BUDGET.meaning, long_help = long_help(settings::BACKLOG_BUDGET, "\
Items that expire now always go first and are not budgeted. The backlog is capped at this share of \
the table's write capacity (one write unit per delete of an item up to 1 KB); it starts at a \
quarter of that and grows, and every refusal from the table cuts its rate by a tenth, which then \
grows back slowly: the deletes of a catch-up settle below the point where partitions refuse, so \
the application writing to the same table keeps its capacity. The capacity is what DescribeTable \
says (provisioned WCU, or an on-demand table's maximum throughput), AWS's default per-table limit \
of 40,000 write units/s for an on-demand table without a maximum, or --table-write-capacity. The \
default is chosen in docs/benchmarks.md (\"A good neighbour\"). /metrics: \
precise_ttl_backlog_rate_limit"))]
    pub backlog_budget: BudgetShare,

    #[arg(long, env = "PRECISE_TTL_TABLE_WRITE_CAPACITY", value_name = "UNITS",
          value_parser = settings::table_write_capacity,
          help = settings::TABLE_WRITE_CAPACITY.meaning,
          long_help = long_help(settings::TABLE_WRITE_CAPACITY, "\
For an on-demand table whose real ceiling is lower than AWS's default limit, or to leave room for \
writes DynamoDB cannot foresee"))]
    pub table_write_capacity: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_parse_and_print() {
        assert_eq!("off".parse::<BudgetShare>(), Ok(BudgetShare(None)));
        assert_eq!("0.25".parse::<BudgetShare>(), Ok(BudgetShare(Some(0.25))));
        for bad in ["0", "1.5", "-1", "half", "NaN"] {
            assert!(bad.parse::<BudgetShare>().is_err(), "{bad}");
        }
        assert_eq!(BudgetShare(Some(0.5)).to_string(), "0.5");
        assert_eq!(BudgetShare(None).to_string(), "off");
    }
}
