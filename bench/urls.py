"""The product's URLconf plus the two floor endpoints (selected by MEMSITE_BENCH_FLOORS=1).

The floors come after every product route, so product requests resolve exactly as in
production and the floors pay the full resolution walk (never a cheaper one).
"""

from django.urls import path

from bench import floors
from memsite.urls import urlpatterns as product_urlpatterns

urlpatterns = [
    *product_urlpatterns,
    path("bench/floor/insert/", floors.InsertFloorView.as_view(), name="bench-floor-insert"),
    path("bench/floor/read/", floors.ReadFloorView.as_view(), name="bench-floor-read"),
]
