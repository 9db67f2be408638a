#!/bin/bash
find /app/topaz -type f -size +1000c > /app/salmon_large.txt
