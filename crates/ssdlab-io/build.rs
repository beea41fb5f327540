//! Links libblkid by its soname, so building ssdlab needs no development package: every Linux system with
//! util-linux has libblkid.so.1 (its ABI has been stable since 2009), while the unversioned libblkid.so that
//! `-lblkid` looks for comes only with libblkid-dev.
fn main() {
    println!("cargo:rustc-link-lib=dylib:+verbatim=libblkid.so.1");
}
