// The translation unit that compiles the test files' precompiled header (hfta_test_pch in
// CMakeLists.txt); it holds nothing else.
