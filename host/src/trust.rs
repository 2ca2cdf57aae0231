//! Whether someone other than this process's user could have written a file: the
//! one check shared by what the host trusts from disk (the compile cache's entries,
//! which it runs as machine code, and the tokens file, which says who may call), and
//! the owner-only directory the host makes for them.
//!
//! A leaf module: it knows files, modes and owners, nothing of what they hold.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::Path;

/// Checks what `meta` describes (of `path`; a directory when `dir`): not a symbolic
/// link, owned by this process's user or by root (who can write anything anyway),
/// and writable by nobody else: no group or other write bit, except on a directory
/// with the sticky bit (as `/tmp`), where no one may rename or remove another's file.
/// `Err` says what is wrong and how to fix it, naming `path`.
pub(crate) fn trusted(path: &Path, meta: &fs::Metadata, dir: bool) -> Result<(), String> {
    let shown = path.display();
    if meta.file_type().is_symlink() {
        return Err(format!("{shown} is a symbolic link"));
    }
    if dir != meta.is_dir() {
        return Err(format!(
            "{shown} is not a {}",
            if dir { "directory" } else { "file" }
        ));
    }
    let me = effective_uid();
    if meta.uid() != me && meta.uid() != 0 {
        return Err(format!(
            "{shown} is owned by user {}, not by this user ({me}) or root",
            meta.uid()
        ));
    }
    let sticky = dir && meta.mode() & 0o1000 != 0;
    if meta.mode() & 0o022 != 0 && !sticky {
        return Err(format!(
            "{shown} is writable by its group or by others (mode {:o}); `chmod go-w` it",
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// This process's effective user id.
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    unsafe {
        libc::geteuid()
    }
}

/// Creates `dir` and any missing parents, each new one `0700`: what it will hold
/// (a journal, the tokens file, compiled code) is this user's alone. Existing
/// directories are left as they are.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn check(path: &Path, dir: bool) -> Result<(), String> {
        trusted(path, &fs::symlink_metadata(path).unwrap(), dir)
    }

    #[test]
    fn only_a_file_and_directory_nobody_else_can_write_are_trusted() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        create_private_dir(&dir).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!((mode(&dir), mode(&root.path().join("a"))), (0o700, 0o700));
        check(&dir, true).unwrap();
        let file = dir.join("f");
        fs::write(&file, b"x").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        check(&file, false).unwrap();
        assert!(check(&file, true).unwrap_err().contains("not a directory"));

        for bad in [0o664, 0o666, 0o646] {
            fs::set_permissions(&file, fs::Permissions::from_mode(bad)).unwrap();
            let why = check(&file, false).unwrap_err();
            assert!(why.contains("writable by its group or by others"), "{why}");
            assert!(why.contains(&file.display().to_string()), "{why}");
        }
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        assert!(check(&dir, true).is_err());
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777)).unwrap();
        check(&dir, true).expect("a sticky directory: no one replaces another's file");

        let link = dir.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(check(&link, false).unwrap_err().contains("symbolic link"));

        // Another user's file: only root can make one to test with.
        if effective_uid() == 0 {
            fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::chown(&file, Some(4242), None).unwrap();
            let why = check(&file, false).unwrap_err();
            assert!(why.contains("owned by user 4242"), "{why}");
        }
    }
}
