#!/bin/bash
find /app/topaz -type f -name '*.log' > /app/velvet_found.txt
