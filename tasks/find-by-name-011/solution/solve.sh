#!/bin/bash
find /app/bramble -type f -name '*.txt' > /app/castle_found.txt
