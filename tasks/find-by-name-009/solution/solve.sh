#!/bin/bash
find /app/willow -type f -name '*.csv' > /app/sparrow_found.txt
