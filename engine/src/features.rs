//! Feature levels (KIP-584): the features this broker supports, the level each is finalized at,
//! and the epoch of those levels — what ApiVersions reports and UpdateFeatures changes.
//!
//! One feature is finalized here: `transaction.version` (KIP-890; server-common
//! `TransactionVersion.java`). Clients read it from ApiVersions: the Java client speaks
//! transactions v2 (an epoch bump per transaction, partitions added by Produce and
//! TxnOffsetCommit themselves) when it is at least 2, v1 below. A new broker starts at 2, as a
//! new Kafka 4.x cluster does; the level survives restarts (`DATA/features`, written before
//! UpdateFeatures is answered). The epoch rises with every change, because the Java client only
//! re-reads the finalized features of a response whose epoch is newer than the last it saw
//! (`TransactionManager.maybeUpdateTransactionV2Enabled`).
//!
//! Other Kafka features (`metadata.version`, `kraft.version`, `group.version`, ...) are not
//! listed: they gate KRaft metadata or protocols whose on/off switch this broker does not have.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI16, AtomicI64, Ordering};
use std::sync::Mutex;

/// The feature name (`TransactionVersion.FEATURE_NAME`).
pub const TRANSACTION_VERSION: &str = "transaction.version";

/// The levels of `transaction.version` this broker supports: 0 (no KIP-890), 1 (the
/// `__transaction_state` value is written at version 1, clients still use v1), 2 (v2).
pub const TRANSACTION_VERSION_MIN: i16 = 0;
pub const TRANSACTION_VERSION_MAX: i16 = 2;

/// The level a new data directory starts at (`TransactionVersion.LATEST_PRODUCTION`).
pub const TRANSACTION_VERSION_DEFAULT: i16 = 2;

/// Finalized feature levels, read on every ApiVersions and transaction record; changed rarely.
#[derive(Debug)]
pub struct Features {
    path: Option<PathBuf>,
    transaction_version: AtomicI16,
    epoch: AtomicI64,
    /// Serialises changes (read, write the file, publish).
    change: Mutex<()>,
}

impl Features {
    /// The levels stored in `data_dir` (the defaults when it has none; `None`: in memory only).
    pub fn open(data_dir: Option<&Path>) -> std::io::Result<Self> {
        let path = data_dir.map(|d| d.join("features"));
        let (mut tv, mut epoch) = (TRANSACTION_VERSION_DEFAULT, 1);
        if let Some(p) = &path {
            if let Some(bytes) = storage::durable_file::read(p)? {
                let text = String::from_utf8(bytes).map_err(|_| bad(p, "not UTF-8"))?;
                (tv, epoch) = parse(&text).ok_or_else(|| bad(p, "unreadable"))?;
            }
        }
        Ok(Self {
            path,
            transaction_version: AtomicI16::new(tv),
            epoch: AtomicI64::new(epoch),
            change: Mutex::new(()),
        })
    }

    /// The finalized `transaction.version`.
    pub fn transaction_version(&self) -> i16 {
        self.transaction_version.load(Ordering::Acquire)
    }

    /// The epoch of the finalized levels (ApiVersions `FinalizedFeaturesEpoch`).
    pub fn epoch(&self) -> i64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Finalize `transaction.version` at `level` (in the supported range, checked by the
    /// caller), durably, with a new epoch. Blocking (a file write and fsync): call off the
    /// reactor. No change, no write.
    pub fn set_transaction_version(&self, level: i16) -> std::io::Result<()> {
        let _g = self.change.lock().unwrap_or_else(|p| p.into_inner());
        if level == self.transaction_version() {
            return Ok(());
        }
        let epoch = self.epoch() + 1;
        if let Some(p) = &self.path {
            let text = format!("{TRANSACTION_VERSION}={level}\nepoch={epoch}\n");
            storage::durable_file::write_atomic(p, text.as_bytes())?;
        }
        self.transaction_version.store(level, Ordering::Release);
        self.epoch.store(epoch, Ordering::Release);
        Ok(())
    }
}

/// `FeatureUpdate.UpgradeType` codes (UpdateFeatures v1+ `UpgradeType`).
pub mod upgrade_type {
    pub const UPGRADE: i8 = 1;
    pub const SAFE_DOWNGRADE: i8 = 2;
    pub const UNSAFE_DOWNGRADE: i8 = 3;
}

/// Whether `feature` may go from level `current` to `level` with `upgrade_type`, as Kafka's
/// controller decides (`FeatureControlManager.updateFeature`, `QuorumFeatures.reasonNotSupported`):
/// `Err` is the INVALID_UPDATE_VERSION message. Only `transaction.version` is known here; any
/// other feature is one this broker "does not support".
pub fn check_update(
    node_id: i32,
    feature: &str,
    current: i16,
    level: i16,
    upgrade_type: i8,
) -> Result<(), String> {
    let invalid = |why: String| {
        Err(format!(
            "Invalid update version {level} for feature {feature}. {why}"
        ))
    };
    if !matches!(
        upgrade_type,
        upgrade_type::UPGRADE | upgrade_type::SAFE_DOWNGRADE | upgrade_type::UNSAFE_DOWNGRADE
    ) {
        return invalid("The controller does not support the given upgrade type.".into());
    }
    if level < 0 {
        return invalid("A feature version cannot be less than 0.".into());
    }
    if feature != TRANSACTION_VERSION {
        return invalid(format!(
            "Local controller {node_id} does not support this feature."
        ));
    }
    if !(TRANSACTION_VERSION_MIN..=TRANSACTION_VERSION_MAX).contains(&level) {
        return invalid(format!(
            "Local controller {node_id} only supports versions {TRANSACTION_VERSION_MIN}-{TRANSACTION_VERSION_MAX}"
        ));
    }
    if level < current && upgrade_type == upgrade_type::UPGRADE {
        return invalid(
            "Can't downgrade the version of this feature without setting the upgrade type to \
             either safe or unsafe downgrade."
                .into(),
        );
    }
    if level > current && upgrade_type != upgrade_type::UPGRADE {
        return invalid("Can't downgrade to a newer version.".into());
    }
    Ok(())
}

fn bad(p: &Path, why: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{}: {why}", p.display()),
    )
}

/// `transaction.version=L` and `epoch=E` lines; both must be there and in range.
fn parse(text: &str) -> Option<(i16, i64)> {
    let (mut tv, mut epoch) = (None, None);
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (k, v) = line.split_once('=')?;
        match k {
            TRANSACTION_VERSION => tv = Some(v.parse::<i16>().ok()?),
            "epoch" => epoch = Some(v.parse::<i64>().ok()?),
            _ => return None,
        }
    }
    let tv = tv.filter(|l| (TRANSACTION_VERSION_MIN..=TRANSACTION_VERSION_MAX).contains(l))?;
    Some((tv, epoch.filter(|e| *e >= 0)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_survives_a_restart_with_a_newer_epoch() {
        let dir = std::env::temp_dir().join(format!("rl-features-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let f = Features::open(Some(&dir)).unwrap();
        assert_eq!(f.transaction_version(), TRANSACTION_VERSION_DEFAULT);
        let e0 = f.epoch();
        f.set_transaction_version(1).unwrap();
        assert_eq!((f.transaction_version(), f.epoch()), (1, e0 + 1));
        f.set_transaction_version(1).unwrap();
        assert_eq!(f.epoch(), e0 + 1, "no change, no new epoch");
        drop(f);
        let f = Features::open(Some(&dir)).unwrap();
        assert_eq!((f.transaction_version(), f.epoch()), (1, e0 + 1));
        f.set_transaction_version(2).unwrap();
        assert_eq!((f.transaction_version(), f.epoch()), (2, e0 + 2));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn updates_are_checked_as_kafkas_controller_checks_them() {
        use upgrade_type::*;
        assert_eq!(
            check_update(1, TRANSACTION_VERSION, 2, 1, SAFE_DOWNGRADE),
            Ok(())
        );
        assert_eq!(check_update(1, TRANSACTION_VERSION, 1, 2, UPGRADE), Ok(()));
        assert_eq!(check_update(1, TRANSACTION_VERSION, 2, 2, UPGRADE), Ok(()));
        assert_eq!(
            check_update(1, TRANSACTION_VERSION, 2, 0, UNSAFE_DOWNGRADE),
            Ok(())
        );
        let err = |f, cur, lvl, t| check_update(1, f, cur, lvl, t).unwrap_err();
        assert_eq!(
            err(TRANSACTION_VERSION, 2, 1, UPGRADE),
            "Invalid update version 1 for feature transaction.version. Can't downgrade the version \
             of this feature without setting the upgrade type to either safe or unsafe downgrade."
        );
        assert!(err(TRANSACTION_VERSION, 1, 2, SAFE_DOWNGRADE)
            .ends_with("Can't downgrade to a newer version."));
        assert!(err(TRANSACTION_VERSION, 2, 3, UPGRADE).ends_with("only supports versions 0-2"));
        assert!(err(TRANSACTION_VERSION, 2, -1, SAFE_DOWNGRADE).ends_with("cannot be less than 0."));
        assert!(err("no.such.feature", 0, 1, UPGRADE).ends_with("does not support this feature."));
        assert!(err(TRANSACTION_VERSION, 2, 1, 0).ends_with("the given upgrade type."));
    }

    #[test]
    fn a_damaged_file_is_an_error_not_a_default() {
        assert_eq!(parse("transaction.version=1\nepoch=7\n"), Some((1, 7)));
        assert_eq!(parse("transaction.version=3\nepoch=7\n"), None);
        assert_eq!(parse("transaction.version=1\n"), None);
        assert_eq!(parse("transaction.version=x\nepoch=1"), None);
        assert_eq!(parse("other=1\nepoch=1"), None);
    }
}
