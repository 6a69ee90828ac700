# Run at every build (cmake -P): writes OUT, a header with the version and
# the source tree's git commit, so that `mrmf --version`, summaries, reports
# and checkpoints say which build made them. configure_file rewrites the
# file only when its text changes: a build after a new commit recompiles
# core/version.cpp alone, and a build without one recompiles nothing.
# Inputs: SRC (source tree), OUT (header path), VERSION (project version).
set(MRMF_GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SRC}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SRC}" rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE commit RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc EQUAL 0 AND commit)
    set(MRMF_GIT_COMMIT "${commit}")
    # Tracked files changed since that commit: the build is not the commit.
    execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SRC}" status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE changes RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0 AND NOT changes STREQUAL "")
      string(APPEND MRMF_GIT_COMMIT "-dirty")
    endif()
  endif()
endif()
set(MRMF_VERSION "${VERSION}")
configure_file("${CMAKE_CURRENT_LIST_DIR}/build_info.h.in" "${OUT}" @ONLY)
