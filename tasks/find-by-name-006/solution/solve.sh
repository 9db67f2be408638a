#!/bin/bash
find /app/maple -type f -name '*.json' > /app/found.txt
