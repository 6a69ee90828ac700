# Run at every build (cmake -P): writes OUT, a header with the version and
# the source tree's git commit, so that `mrmf --version`, summaries, reports
# and checkpoints say which build made them. configure_file rewrites the
# file only when its text changes: a build after a new commit recompiles
# core/version.cpp alone, and a build without one recompiles nothing.
# Inputs: SRC (source tree), OUT (header path), VERSION (project version).
set(MRMF_GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SRC}/.git")
  # safe.directory: a tree owned by another user (a shared project folder, a
  # container's remapped ids) is refused by git's ownership check, and the
  # build compiles that tree's code anyway. --no-optional-locks: a build must
  # not take the repository's index lock (a commit at the same time failed).
  set(git "${GIT_EXECUTABLE}" -c "safe.directory=${SRC}" --no-optional-locks -C "${SRC}")
  execute_process(COMMAND ${git} rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE commit RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_VARIABLE err)
  if(rc EQUAL 0 AND commit)
    set(MRMF_GIT_COMMIT "${commit}")
    # Changed tracked files anywhere, or new files where the build globs its
    # sources (compiled in though git does not know them): the build is not
    # the commit. Build folders stay out of it.
    execute_process(COMMAND ${git} status --porcelain --untracked-files=normal --
                            core kernels layers optim models data fusion apps tests bench cmake CMakeLists.txt
                    OUTPUT_VARIABLE untracked RESULT_VARIABLE rc1 ERROR_QUIET)
    execute_process(COMMAND ${git} status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE changes RESULT_VARIABLE rc2 ERROR_QUIET)
    if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
      string(APPEND MRMF_GIT_COMMIT "-dirty?")  # could not tell
    elseif(NOT untracked STREQUAL "" OR NOT changes STREQUAL "")
      string(APPEND MRMF_GIT_COMMIT "-dirty")
    endif()
  else()
    message(WARNING "mrmf: the git commit of ${SRC} is unknown (git said: ${err}); builds will say 'git unknown'")
  endif()
endif()
set(MRMF_VERSION "${VERSION}")
configure_file("${CMAKE_CURRENT_LIST_DIR}/build_info.h.in" "${OUT}" @ONLY)
