// Planted bugs in wgmma code (placeholder, filled below).
#include <doctest/doctest.h>
