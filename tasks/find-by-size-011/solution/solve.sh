#!/bin/bash
find /app/topaz -type f -size +1000c > /app/large.txt
