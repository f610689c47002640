//! `run`'s capacity budget: how much of the table's write capacity a catch-up may take.

use clap::Args;
use precise_ttl_core::capacity::{self, WriteCapacity};

/// The share of the table's write capacity the backlog may use, or none (`off`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetShare(pub Option<f64>);

impl Default for BudgetShare {
    fn default() -> Self {
        BudgetShare(Some(capacity::DEFAULT_BACKLOG_SHARE))
    }
}

impl std::fmt::Display for BudgetShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(share) => write!(f, "{share}"),
            None => f.write_str("off"),
        }
    }
}

impl std::str::FromStr for BudgetShare {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        capacity::parse_share(s).map(BudgetShare)
    }
}

#[derive(Debug, Clone, Args)]
pub struct CapacityBudget {
    /// The share of the table's write capacity that deleting the backlog (items already late,
    /// found by the backlog reader after an outage or a slow period) may use; `off`: as fast as
    /// the table accepts
    ///
    /// Items that expire now always go first and are not budgeted. The backlog is capped at
    /// this share of the table's write capacity (one write unit per delete of an item up to
    /// 1 KB); it starts at a quarter of that and grows, and every refusal from the table cuts its
    /// rate by a tenth, which then grows back slowly:
    /// the deletes of a catch-up settle below the point where partitions refuse, so the
    /// application writing to the same table keeps its capacity. The capacity is what
    /// DescribeTable says (provisioned WCU, or an on-demand table's maximum throughput), AWS's
    /// default per-table limit of 40,000 write units/s for an on-demand table without a maximum,
    /// or --table-write-capacity. The default is chosen in docs/benchmarks.md ("A good
    /// neighbour"). /metrics: precise_ttl_backlog_rate_limit
    #[arg(long, env = "PRECISE_TTL_BACKLOG_BUDGET", default_value_t = BudgetShare::default(), value_name = "SHARE|off")]
    pub backlog_budget: BudgetShare,

    /// The table's write capacity (write units/s) for the backlog budget, instead of what
    /// DescribeTable says: for an on-demand table whose real ceiling is lower than AWS's default
    /// limit, or to leave room for writes DynamoDB cannot foresee
    #[arg(long, env = "PRECISE_TTL_TABLE_WRITE_CAPACITY", value_parser = clap::value_parser!(u64).range(1..), value_name = "UNITS")]
    pub table_write_capacity: Option<u64>,
}

impl CapacityBudget {
    /// The backlog's ceiling in deletes/s for a table of `described` capacity, and a line
    /// saying where it comes from (`None`: no budget).
    pub fn ceiling(&self, described: WriteCapacity) -> Option<(f64, String)> {
        let share = self.backlog_budget.0?;
        let capacity = self
            .table_write_capacity
            .map_or(described, WriteCapacity::Given);
        let ceiling = capacity::backlog_ceiling(capacity, share);
        Some((
            ceiling,
            format!(
                "backlog budget {ceiling:.0} deletes/s ({:.0} % of {capacity})",
                share * 100.0
            ),
        ))
    }
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
        assert_eq!(BudgetShare::default().to_string(), "0.5");
        assert_eq!(BudgetShare(None).to_string(), "off");
    }

    #[test]
    fn the_ceiling_comes_from_the_table_or_the_flag() {
        let mut b = CapacityBudget {
            backlog_budget: BudgetShare(Some(0.5)),
            table_write_capacity: None,
        };
        let (c, why) = b.ceiling(WriteCapacity::Provisioned(10_000)).unwrap();
        assert_eq!(c, 5_000.0);
        assert!(why.contains("50 % of 10000 provisioned WCU"), "{why}");
        b.table_write_capacity = Some(2_000);
        assert_eq!(
            b.ceiling(WriteCapacity::OnDemandDefault).unwrap().0,
            1_000.0
        );
        b.backlog_budget = BudgetShare(None);
        assert!(b.ceiling(WriteCapacity::OnDemandDefault).is_none());
    }
}
