! SPDX-License-Identifier: MIT
! heaplens.f90 - include/heaplens.h for Fortran, through ISO_C_BINDING. Compile it with the
! program (gfortran -c heaplens.f90, then `use heaplens`) and link libheaplens-api
! (pkg-config --libs heaplens). The functions and their results are the C ones: 0 on success,
! -1 when not traced; heaplens_is_traced() is 1 or 0.
module heaplens
    use, intrinsic :: iso_c_binding
    implicit none

    integer(c_int), parameter :: HEAPLENS_TEXT = 0, HEAPLENS_JSON = 1
    integer(c_int), parameter :: HEAPLENS_FREED = 1, HEAPLENS_RESIZED = 2
    integer(c_int), parameter :: HEAPLENS_BLOCK = 1, HEAPLENS_DELTA = 2

    type, bind(c) :: heaplens_amount
        integer(c_size_t) :: bytes, blocks
    end type

    type, bind(c) :: heaplens_leak_counts
        type(heaplens_amount) :: definitely_lost, indirectly_lost, possibly_lost, still_reachable
    end type

    type, bind(c) :: heaplens_stats_t
        integer(c_size_t) :: live_bytes, live_blocks, peak_bytes, peak_blocks
        integer(c_int64_t) :: peak_time_ns
        integer(c_int64_t) :: allocations, frees, bytes_allocated
        integer(c_int64_t) :: thread_allocations, thread_frees
        integer(c_int64_t) :: thread_bytes_allocated, thread_bytes_freed
    end type

    interface
        integer(c_int) function heaplens_is_traced() bind(c, name="heaplens_is_traced")
            import :: c_int
        end function
        integer(c_int) function heaplens_pause() bind(c, name="heaplens_pause")
            import :: c_int
        end function
        integer(c_int) function heaplens_resume() bind(c, name="heaplens_resume")
            import :: c_int
        end function
        integer(c_int64_t) function heaplens_mark() bind(c, name="heaplens_mark")
            import :: c_int64_t
        end function
        integer(c_int) function heaplens_report_since(mark, fd, format) &
                bind(c, name="heaplens_report_since")
            import :: c_int, c_int64_t
            integer(c_int64_t), value :: mark
            integer(c_int), value :: fd, format
        end function
        integer(c_int) function heaplens_report(fd, format) bind(c, name="heaplens_report")
            import :: c_int
            integer(c_int), value :: fd, format
        end function
        integer(c_int) function heaplens_leak_check(counts) bind(c, name="heaplens_leak_check")
            import :: c_int, heaplens_leak_counts
            type(heaplens_leak_counts), intent(out) :: counts
        end function
        integer(c_int) function heaplens_leak_check_new(counts) &
                bind(c, name="heaplens_leak_check_new")
            import :: c_int, heaplens_leak_counts
            type(heaplens_leak_counts), intent(out) :: counts
        end function
        integer(c_int) function heaplens_ignore(ptr) bind(c, name="heaplens_ignore")
            import :: c_int, c_ptr
            type(c_ptr), value :: ptr
        end function
        ! callback: subroutine cb(ptr, event, where, arg) bind(c), with ptr, where and arg
        ! type(c_ptr), value and event integer(c_int), value; c_null_funptr removes the watch
        integer(c_int) function heaplens_watch(ptr, callback, arg) bind(c, name="heaplens_watch")
            import :: c_int, c_ptr, c_funptr
            type(c_ptr), value :: ptr, arg
            type(c_funptr), value :: callback
        end function
        integer(c_int) function heaplens_tag(type, location) bind(c, name="heaplens_tag")
            import :: c_int
            integer(c_int), value :: type, location
        end function
        integer(c_int) function heaplens_untag() bind(c, name="heaplens_untag")
            import :: c_int
        end function
        ! callback: subroutine cb(which, bytes, arg) bind(c), with which integer(c_int),
        ! bytes integer(c_size_t) and arg type(c_ptr), all value
        integer(c_int) function heaplens_set_thresholds(block_bytes, delta_bytes, delta_ns, &
                callback, arg) bind(c, name="heaplens_set_thresholds")
            import :: c_int, c_size_t, c_int64_t, c_ptr, c_funptr
            integer(c_size_t), value :: block_bytes, delta_bytes
            integer(c_int64_t), value :: delta_ns
            type(c_funptr), value :: callback
            type(c_ptr), value :: arg
        end function
        integer(c_int) function heaplens_stats(stats) bind(c, name="heaplens_stats")
            import :: c_int, heaplens_stats_t
            type(heaplens_stats_t), intent(out) :: stats
        end function
    end interface
end module heaplens
