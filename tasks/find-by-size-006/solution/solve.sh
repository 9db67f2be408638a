#!/bin/bash
find /app/bucket -type f -size +1000c > /app/large.txt
