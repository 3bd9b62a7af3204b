# cmake --install: the compiler's headers (with the tablegen-generated .h.inc
# from the build tree), its libraries, and PipeOptConfig.cmake with the targets
# PipeOpt::<library>, so that another project can
#   find_package(PipeOpt CONFIG REQUIRED)
#   target_link_libraries(my-opt PRIVATE PipeOpt::PipeInitAll MLIR)
# (examples/downstream). The tools install themselves (tools/, partitioner/,
# runtime/).
#
# add_mlir_library would install each library into MLIR's own export set
# (MLIRTargets); ours pass DISABLE_INSTALL and are installed here instead, into
# PipeOptTargets, which the partitioner joins (PIPE_PARTITIONER_EXPORT_SET).
include(CMakePackageConfigHelpers)

# Every library a downstream tool may link, in no particular order. A library
# missing here that one of these links makes the configure step fail
# ("requires target ... that is not in any export set").
set(PIPE_INSTALLED_LIBRARIES
  PipeNNDialect PipeNNTransforms PipePipeDialect PipePipeTransforms PipeAnalysis
  PipePipeToEmitC PipeOnnxImport PipeDriver PipeInitAll PipeChainBuilder)

foreach(_lib IN LISTS PIPE_INSTALLED_LIBRARIES)
  # The build tree reaches the headers through include_directories(); an
  # installed target carries the installed include directory itself.
  target_include_directories(${_lib} INTERFACE
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()

install(TARGETS ${PIPE_INSTALLED_LIBRARIES} EXPORT PipeOptTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/pipe
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.td")
install(DIRECTORY ${PROJECT_BINARY_DIR}/include/pipe
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h.inc"
  PATTERN "CMakeFiles" EXCLUDE)

set(PIPE_OPT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/PipeOpt)
install(EXPORT PipeOptTargets
  NAMESPACE PipeOpt::
  FILE PipeOptTargets.cmake
  DESTINATION ${PIPE_OPT_CMAKE_DIR})
configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/PipeOptConfig.cmake.in
  ${PROJECT_BINARY_DIR}/PipeOptConfig.cmake
  INSTALL_DESTINATION ${PIPE_OPT_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/PipeOptConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/PipeOptConfig.cmake
  ${PROJECT_BINARY_DIR}/PipeOptConfigVersion.cmake
  DESTINATION ${PIPE_OPT_CMAKE_DIR})
