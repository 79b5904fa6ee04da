//! [`setters!`](crate::setters) and [`merge_sums!`](crate::merge_sums): the builder
//! methods of settings structs and the `merge` of figures that add up, written once.

/// Inside an `impl` block of a settings struct, one builder method per field named:
/// `pub fn field(mut self, field: Type) -> Self` that sets the field and returns the
/// settings. Each entry takes its doc comment.
///
/// ```
/// #[derive(Default)]
/// pub struct Settings {
///     /// Bytes of a chunk.
///     pub chunk: usize,
///     /// Whether to keep it.
///     pub keep: bool,
/// }
///
/// impl Settings {
///     devpool_core::setters! {
///         /// Another chunk size.
///         chunk: usize,
///         /// Keep it, or not.
///         keep: bool,
///     }
/// }
///
/// let s = Settings::default().chunk(4096).keep(true);
/// assert_eq!((s.chunk, s.keep), (4096, true));
/// ```
#[macro_export]
macro_rules! setters {
    ($($(#[$doc:meta])* $field:ident: $ty:ty),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $field(mut self, $field: $ty) -> Self {
                self.$field = $field;
                self
            }
        )*
    };
}

/// Inside an `impl` block of a struct of figures that add up across pools, its
/// `merge`: `merge_sums!(Type: a, b, c)` writes `pub fn merge(&mut self, o: &Type)`
/// adding each named field of `o` into `self`.
///
/// ```
/// #[derive(Default)]
/// pub struct Figures {
///     /// Blocks.
///     pub blocks: u64,
///     /// Bytes.
///     pub bytes: u64,
/// }
///
/// impl Figures {
///     devpool_core::merge_sums!(Figures: blocks, bytes);
/// }
///
/// let mut a = Figures { blocks: 1, bytes: 10 };
/// a.merge(&Figures { blocks: 2, bytes: 20 });
/// assert_eq!((a.blocks, a.bytes), (3, 30));
/// ```
#[macro_export]
macro_rules! merge_sums {
    ($ty:ty: $($field:ident),+ $(,)?) => {
        /// Add another pool's figures into these.
        pub fn merge(&mut self, o: &$ty) {
            $(self.$field += o.$field;)+
        }
    };
}
