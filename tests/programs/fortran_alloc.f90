! fortran_alloc: allocate/deallocate in a loop, and one module allocatable never deallocated.
!   churn:        10 rounds of allocate(work(1000)) real(8) = 8000 B, deallocate
!   keep_forever: allocate(kept(1234)) integer(4) = 4936 B, never deallocated: still reachable
!                 (the module's array descriptor, in static storage, points to it)
module heapmod
  implicit none
  integer, allocatable :: kept(:)
contains
  subroutine churn(total)
    real(8), intent(out) :: total
    real(8), allocatable :: work(:)
    integer :: round, i
    total = 0
    do round = 1, 10
      allocate(work(1000))
      do i = 1, 1000
        work(i) = real(i + round, 8)
      end do
      total = total + sum(work)
      deallocate(work)
    end do
  end subroutine churn

  subroutine keep_forever()
    integer :: i
    allocate(kept(1234))
    do i = 1, 1234
      kept(i) = i
    end do
  end subroutine keep_forever
end module heapmod

program fortran_alloc
  use heapmod
  implicit none
  real(8) :: total
  call churn(total)
  call keep_forever()
  if (total /= 5060000.0d0 .or. sum(kept) /= 761995) then
    print '(a)', 'fortran_alloc: wrong sum'
    stop 1
  end if
  print '(a)', 'fortran_alloc done'
end program fortran_alloc
