//! A runway of zeros written ahead of SQLite's frames in the WAL, so that a durable
//! point's fsync overwrites blocks the file already has.
//!
//! SQLite appends a commit's frames to the WAL; until the log first restarts, each
//! append makes the file longer. An `fdatasync` of a file that grew must also write
//! its new size and the blocks it was given: on ext4 (a 2-core VM's virtual disk) the
//! fsync of one frame took about 140 µs into new space against 95 µs over written
//! blocks. Space from `fallocate` does not help: its blocks are "unwritten" until
//! written, and the fsync then records that change instead (about 150 µs).
//!
//! So at the start of each group-commit round of a `Full` journal, when SQLite's
//! frames have come within [`LOOKAHEAD`] bytes of the file's end, the leader appends
//! [`CHUNK`] bytes of zeros. The next durable point's fsync carries them once; later
//! fsyncs overwrite written blocks of a file whose size does not change.
//!
//! Why this cannot harm the log:
//! - the zeros go past the file's end only, while the round holds the WAL's write
//!   lock (`BEGIN IMMEDIATE`). Every write SQLite makes to the WAL file (frames,
//!   the header when the log starts over, a rewrite of the open transaction's
//!   frames, a truncation by a `TRUNCATE` checkpoint or `journal_size_limit`) is
//!   made under that lock, and it deletes the file only at the last connection's
//!   close, never while this store's is open. So no connection, in this process or
//!   another, writes the WAL meanwhile, and SQLite appends nowhere but after its
//!   last frame (or starts over from the file's start);
//! - a WAL longer than its valid frames is a state SQLite makes itself (after a
//!   restart the old frames stay behind the new ones): readers use only the frames
//!   the WAL index lists, and recovery stops at the first invalid frame. A frame of
//!   zeros is invalid twice over: its page number is 0, which SQLite rejects
//!   outright, and it does not carry the log's salts. A WAL of zeros only (a new
//!   one, laid before SQLite's first frame) reads as an empty log, as it was.
//!
//! Where the frames end is read from the file itself, not remembered, so several
//! processes sharing one journal do not stack runways on each other's: the leader
//! reads the frame header [`LOOKAHEAD`] bytes before the end, and a page number of 0
//! there means the runway is still unused. A stale frame from before a restart reads
//! as used: that extends the file once, and the new zeros then read as unused.
//!
//! The runway is an optimization only: a failure to lay it (a full disk) leaves
//! SQLite's frames as they were (perhaps with part of a chunk of zeros after them),
//! is logged, and is tried again in a later round; SQLite reports its own writes'
//! failures as before. The 1 MiB is claimed from the disk before SQLite needs it.
//! Where another process shrinks the WAL (`PRAGMA journal_size_limit`), the runway
//! is laid again after it: time lost, nothing else. On a copy-on-write file system
//! an overwrite allocates anyway, so the runway saves nothing there.
//!
//! The simulator's power-loss model measures what a power cut keeps by the WAL's
//! length (`durable::synced_wal_length`), which a runway would overstate, so a
//! journal opened for it lays none.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// How many bytes of zeros one extension appends (not a whole number of frames:
/// frames are found from the file's start, not its end).
pub(crate) const CHUNK: u64 = 1 << 20;

/// How close to the file's end SQLite's frames may come before the runway is
/// extended.
pub(crate) const LOOKAHEAD: u64 = 256 << 10;

/// The WAL's header, before the first frame.
const WAL_HEADER: u64 = 32;

/// A frame's header, before its page.
const FRAME_HEADER: u64 = 24;

/// One chunk of zeros, written from here (zero pages, mapped once: no allocation
/// with the write lock held).
static ZEROS: [u8; CHUNK as usize] = [0; CHUNK as usize];

/// The length of the WAL open as `file`, from `lseek`, not `fstat`: on Linux 6.18
/// here a stat of the file made the next fdatasync about 50 µs longer (likely its
/// multigrain timestamps: the next write then updates the file's times finely).
pub(crate) fn length(file: &File) -> std::io::Result<u64> {
    let mut file = file;
    file.seek(SeekFrom::End(0))
}

/// The runway of one journal's WAL, written through a descriptor of its own.
#[derive(Debug)]
pub(crate) struct Runway {
    file: File,
    /// A frame's size: its header and one page.
    frame: u64,
}

impl Runway {
    /// Opens the WAL at `wal` for a runway, for pages of `page_size` bytes.
    pub(crate) fn open(wal: &Path, page_size: u64) -> std::io::Result<Self> {
        let file = OpenOptions::new().write(true).read(true).open(wal)?;
        Ok(Self {
            file,
            frame: FRAME_HEADER + page_size,
        })
    }

    /// With the WAL's write lock held: appends [`CHUNK`] bytes of zeros when the
    /// frames come within [`LOOKAHEAD`] of the file's end. Returns whether it did.
    pub(crate) fn extend_if_short(&self) -> std::io::Result<bool> {
        let size = self.size()?;
        if !self.is_short_at(size)? {
            return Ok(false);
        }
        self.file.write_all_at(&ZEROS, size)?;
        Ok(true)
    }

    /// Whether SQLite's frames (or stale frames before a restart) come within
    /// [`LOOKAHEAD`] of the file's end: no runway lies ahead of them.
    #[cfg(test)]
    pub(crate) fn is_short(&self) -> std::io::Result<bool> {
        self.is_short_at(self.size()?)
    }

    fn size(&self) -> std::io::Result<u64> {
        length(&self.file)
    }

    /// Whether a frame header sits within [`LOOKAHEAD`] of the end of a WAL of
    /// `size` bytes (a page number of 0 there is runway).
    fn is_short_at(&self, size: u64) -> std::io::Result<bool> {
        let Some(ahead) = size.checked_sub(LOOKAHEAD + WAL_HEADER) else {
            return Ok(true);
        };
        let header = WAL_HEADER + ahead / self.frame * self.frame;
        let mut page = [0u8; 4];
        self.file.read_exact_at(&mut page, header)?;
        Ok(page != [0; 4])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use rusqlite::Connection;

    const PAGE: u64 = 4096;

    /// A WAL-mode database with one table, as the journal's setup leaves it (no
    /// automatic checkpoint, so the WAL only grows).
    fn wal_db(dir: &Path) -> Connection {
        let conn = Connection::open(dir.join("t.db")).unwrap();
        conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
            .unwrap();
        conn.execute_batch(
            "PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=0;
             CREATE TABLE t (x INTEGER PRIMARY KEY, pad BLOB);",
        )
        .unwrap();
        conn
    }

    /// Where SQLite's own frames end, by its own count.
    fn frames_end(conn: &Connection) -> u64 {
        let frames: u64 = conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))
            .unwrap();
        WAL_HEADER + frames * (FRAME_HEADER + PAGE)
    }

    fn wal_len(dir: &Path) -> u64 {
        std::fs::metadata(dir.join("t.db-wal")).unwrap().len()
    }

    /// Commits `n` rows, from `first` on, each a round that lays the runway under the
    /// write lock as the group's leader does.
    fn commit_rounds(conn: &Connection, runway: &Runway, first: i64, n: i64) -> u64 {
        let mut extended = 0;
        for x in first..first + n {
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            extended += u64::from(runway.extend_if_short().unwrap());
            conn.execute("INSERT INTO t VALUES (?1, zeroblob(3000))", [x])
                .unwrap();
            conn.execute_batch("COMMIT").unwrap();
        }
        extended
    }

    /// Rounds keep the file a runway ahead of SQLite's frames, extending it once a
    /// chunk, not every round; every committed row survives a crash with the runway
    /// in the log (a copy of the files, opened as recovery after a kill would).
    #[test]
    fn the_runway_stays_ahead_of_the_frames_and_a_crash_image_keeps_every_row() {
        let dir = tempfile::tempdir().unwrap();
        let conn = wal_db(dir.path());
        let runway = Runway::open(&dir.path().join("t.db-wal"), PAGE).unwrap();
        let extended = commit_rounds(&conn, &runway, 0, 600);

        // The crash image first: a checkpoint (which `frames_end` runs) would copy the
        // frames into the database file, and recovery must read them from the log.
        let crashed = tempfile::tempdir().unwrap();
        for name in ["t.db", "t.db-wal"] {
            std::fs::copy(dir.path().join(name), crashed.path().join(name)).unwrap();
        }
        let len = wal_len(dir.path());
        let end = frames_end(&conn);
        // The last round's frames may have entered the lookahead since its check.
        let round = 4 * (FRAME_HEADER + PAGE);
        assert!(
            len + round >= end + LOOKAHEAD,
            "{len} bytes, frames end at {end}"
        );
        assert!(
            len <= end + LOOKAHEAD + CHUNK + FRAME_HEADER + PAGE,
            "{len} against {end}"
        );
        // Two or three frames a row (its leaf, the parent, page 1), 600 rows: some
        // 5–7 MB of frames, one extension a chunk.
        let chunks = end / CHUNK;
        assert!(
            (chunks..=chunks + 2).contains(&extended),
            "{extended} extensions for {end} bytes of frames"
        );

        let recovered = Connection::open(crashed.path().join("t.db")).unwrap();
        let (rows, sum): (i64, i64) = recovered
            .query_row("SELECT count(*), sum(x) FROM t", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((rows, sum), (600, (0..600).sum()));
    }

    /// A WAL already long enough (a log that restarted, another process's runway)
    /// is not extended again, and two runways on one WAL do not stack.
    #[test]
    fn a_runway_in_place_is_not_extended_again() {
        let dir = tempfile::tempdir().unwrap();
        let conn = wal_db(dir.path());
        let wal = dir.path().join("t.db-wal");
        let ours = Runway::open(&wal, PAGE).unwrap();
        let theirs = Runway::open(&wal, PAGE).unwrap();
        assert_eq!(commit_rounds(&conn, &ours, 0, 1), 1, "a new WAL is short");
        let len = wal_len(dir.path());

        assert_eq!(commit_rounds(&conn, &theirs, 1, 20), 0);
        assert_eq!(commit_rounds(&conn, &ours, 21, 20), 0);
        assert_eq!(
            wal_len(dir.path()),
            len,
            "the frames stayed within the runway"
        );
    }
}
