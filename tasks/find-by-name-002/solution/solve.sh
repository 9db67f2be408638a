#!/bin/bash
find /app/topaz -type f -name '*.log' > /app/found.txt
