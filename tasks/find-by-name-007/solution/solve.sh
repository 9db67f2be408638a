#!/bin/bash
find /app/needle -type f -name '*.csv' > /app/pine_found.txt
