// fmt's compiled part (fmt::vformat, fmt::vprint, float formatting ...), built once, here.
// Debian ships it only as a shared library (libfmt.so), and redsem's binary links no C++
// library dynamically (README.md, "How the binary is linked"). Built header-only instead
// (FMT_HEADER_ONLY), every file that formats compiled this part again: 3-8 s more each, in
// 52 files (issue 52). The other files see fmt's declarations only.
//
// Defined here: format-inl.h's functions (FMT_FUNC, which is empty when not header-only), and
// the instances of the templates that format.h declares but leaves to the library (declared
// without a body, or `extern template`); the link names any that is missing.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;

} // namespace detail
FMT_END_NAMESPACE
