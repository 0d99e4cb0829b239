# fxcc_add_model.cmake - compiles an ONNX model into a library target of the
# user's build, with the fxcc found by find_package(fxcc).
#
#   fxcc_add_model(TARGET MODEL.onnx
#                  [NAME n]                               C prefix (default: TARGET)
#                  [TARGET_ARCH host|portable|cortex-m]   default host
#                  [CPU cortex-m4|...]                    its flags when cross-compiling
#                  [QUANTIZE int8 CALIBRATE samples.npy]  int8, calibrated on the samples
#                  [RUNTIME shared|copy]                  host default shared: link the
#                                                         installed fxcc::runtime
#                  [OPTIONS flag...])                     more `fxcc compile` flags
#
# TARGET is a static library whose include path holds NAME.h; link it and call
# NAME_run.  fxcc runs when CMake configures, into
# ${CMAKE_CURRENT_BINARY_DIR}/fxcc_TARGET, and again whenever the model, the
# calibration samples or fxcc itself change (they are configure dependencies,
# so the build re-runs CMake, which also picks up a changed set of files:
# weights that grew past 4 KiB get their own file).  The generated folder's
# own CMakeLists.txt builds it, so a cross build (an arm-none-eabi toolchain
# file) compiles it like the user's sources, with the --cpu flags.
function(fxcc_add_model target model)
  cmake_parse_arguments(PARSE_ARGV 2 FXCC "" "NAME;TARGET_ARCH;CPU;QUANTIZE;CALIBRATE;RUNTIME"
                        "OPTIONS")
  if(FXCC_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "fxcc_add_model(${target}): unknown arguments ${FXCC_UNPARSED_ARGUMENTS}")
  endif()
  get_filename_component(model "${model}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT FXCC_NAME)
    set(FXCC_NAME "${target}")
  endif()
  if(NOT FXCC_TARGET_ARCH)
    set(FXCC_TARGET_ARCH host)
  endif()
  if(NOT FXCC_RUNTIME)
    if(FXCC_TARGET_ARCH STREQUAL "host")
      set(FXCC_RUNTIME shared)
    else()
      set(FXCC_RUNTIME copy)
    endif()
  endif()
  set(args compile "${model}" -o "${CMAKE_CURRENT_BINARY_DIR}/fxcc_${target}"
      --name "${FXCC_NAME}" --target "${FXCC_TARGET_ARCH}" --runtime "${FXCC_RUNTIME}"
      --weights c --quiet)
  set(depends "${model}")
  if(FXCC_CPU)
    list(APPEND args --cpu "${FXCC_CPU}")
  endif()
  if(FXCC_QUANTIZE)
    if(NOT FXCC_CALIBRATE)
      message(FATAL_ERROR "fxcc_add_model(${target}): QUANTIZE needs CALIBRATE samples")
    endif()
    get_filename_component(FXCC_CALIBRATE "${FXCC_CALIBRATE}" ABSOLUTE
                           BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND args --quantize "${FXCC_QUANTIZE}" --calibrate "${FXCC_CALIBRATE}")
    list(APPEND depends "${FXCC_CALIBRATE}")
  endif()
  list(APPEND args ${FXCC_OPTIONS})

  get_target_property(fxcc_exe fxcc::fxcc IMPORTED_LOCATION)
  if(NOT fxcc_exe)
    get_target_property(fxcc_exe fxcc::fxcc LOCATION)
  endif()
  execute_process(COMMAND "${fxcc_exe}" ${args} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fxcc_add_model(${target}): fxcc compile failed (${rc}):\n${err}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${depends} "${fxcc_exe}")
  add_subdirectory("${CMAKE_CURRENT_BINARY_DIR}/fxcc_${target}"
                   "${CMAKE_CURRENT_BINARY_DIR}/fxcc_${target}_build")
  if(NOT FXCC_NAME STREQUAL target)
    add_library(${target} ALIAS ${FXCC_NAME})
  endif()
endfunction()
