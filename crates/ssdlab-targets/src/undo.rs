//! Taking back what opening a `file:` target laid out, when a command then refuses to run before any I/O: the
//! file ssdlab created is removed, the one it extended truncated back, each only if the path still names that
//! very inode ([`ssdlab_io::laid_out`]). Nothing that ssdlab did not create or extend in this run is touched.

use ssdlab_io::laid_out::LaidOut;

/// What to take back, if anything.
pub struct Undo(Option<LaidOut>);

impl Undo {
    /// Nothing was laid out (any target but a `file:` that was created or extended).
    pub fn none() -> Self {
        Undo(None)
    }

    pub(crate) fn of(laid_out: Option<LaidOut>) -> Self {
        Undo(laid_out)
    }

    /// Removes the file this run created, proven by its device and inode (`quick` removes its test file as the
    /// disk-mark tools do); a file that was there before is never touched. What happened, in words; None when this
    /// run created no file.
    pub fn remove_created(&self) -> Option<String> {
        let laid_out = self.0.as_ref()?;
        if laid_out.change != ssdlab_io::laid_out::Change::Created {
            return None;
        }
        let path = laid_out.path.display();
        Some(match laid_out.undo() {
            Ok(ssdlab_io::laid_out::Undone::LeftAlone(why)) => format!("test file left in place: {why}"),
            Ok(_) => format!("removed {path}, the test file this run created (--keep keeps it)"),
            Err(e) => format!("could not remove {path}, the test file this run created: {e}"),
        })
    }

    /// The file this run created, when it created one (a run that keeps it says where it is).
    pub fn created(&self) -> Option<&std::path::Path> {
        self.0
            .as_ref()
            .filter(|l| l.change == ssdlab_io::laid_out::Change::Created)
            .map(|l| l.path.as_path())
    }

    /// Takes it back. Only for use before any I/O was issued. A path that no longer names the file is left
    /// alone, and so is an error: the command is already failing with its own message.
    pub fn restore(&self) {
        if let Some(laid_out) = &self.0 {
            let _ = laid_out.undo();
        }
    }
}
