#!/bin/bash
find /app/needle -type f -name '*.csv' > /app/found.txt
